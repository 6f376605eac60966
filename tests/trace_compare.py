"""Trace comparison shared by the fast-path tests (tests/nki/test_fastpath_*.py).
Imported by module name: the root conftest puts ``tests/`` on ``sys.path``."""


def normalized(trace):
    """The instructions with storage ids renumbered in order of appearance (ids come from a
    process-wide counter, so two runs differ there and nowhere else)."""
    ids = {}

    def reg(r):
        return r._replace(tensor=ids.setdefault(r.tensor, len(ids)))
    return [i._replace(reads=tuple(map(reg, i.reads)), writes=tuple(map(reg, i.writes)))
            for i in trace]
