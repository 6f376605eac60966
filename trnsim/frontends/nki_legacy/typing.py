"""``neuronxcc.nki.typing`` / ``nki.typing``: annotation helpers (no runtime effect except that
``mutable_tensor`` parameters may be written)."""


class _Annotation:
    def __init__(self, name: str, mutable: bool = False, shape=None):
        self.name = name
        self._trnsim_mutable = mutable
        self.shape = shape

    def __getitem__(self, shape):
        return _Annotation(self.name, self._trnsim_mutable, shape)

    def __call__(self, *a, **kw):
        return self

    def __repr__(self):
        return f"nt.{self.name}" + (f"[{self.shape}]" if self.shape is not None else "")


tensor = _Annotation("tensor")
mutable_tensor = _Annotation("mutable_tensor", mutable=True)
