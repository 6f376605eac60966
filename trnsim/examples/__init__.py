"""Built-in example kernels (legacy and new NKI API), used by ``trnsim demo`` and the tests."""
