"""YAML loaded with the line of every value, so that sweep-file errors name the file, line and key."""

import yaml


class SweepFileError(ValueError):
    """A mistake in a sweep file; the message starts with `file:line:`."""


class LocatedYaml:
    """The data of a YAML file and the line of each value, addressed by its path of keys and indices."""

    def __init__(self, path):
        self.path = str(path)
        with open(path) as file:
            text = file.read()
        try:
            self.data = yaml.safe_load(text)
            root = yaml.compose(text)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            line = f"{mark.line + 1}:" if mark else ""
            raise SweepFileError(f"{self.path}:{line} malformed YAML: {error}") from None
        self._lines = {}
        if root is not None:
            self._record(root, ())

    def _record(self, node, path):
        self._lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                self._record(value_node, (*path, key_node.value))
                self._lines[(*path, key_node.value, "<key>")] = key_node.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self._record(item, (*path, index))

    def line(self, *path):
        """The line of the value at `path`, or of its nearest enclosing value."""
        path = tuple(path)
        while path and path not in self._lines:
            path = path[:-1]
        return self._lines.get(path, 1)

    def error(self, message, *path):
        """A SweepFileError located at `path`, naming its key."""
        keys = ".".join(str(p) for p in path if not isinstance(p, int) and p != "<key>")
        where = f" key '{keys}':" if keys else ""
        return SweepFileError(f"{self.path}:{self.line(*path)}:{where} {message}")
