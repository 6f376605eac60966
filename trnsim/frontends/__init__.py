"""The public faces users import: ``nki_legacy`` (``neuronxcc.nki``), ``nki`` (``nki`` >= 0.2), ``torch``."""
