"""A small discrete-event core shared by the timing scheduler and the fabric simulator.

SimPy's core shape: a heap of ``(time, priority, seq, item)``; ``seq`` makes ties FIFO so items are
never compared.  Servers: a FIFO ``Resource`` (``acquire_all`` holds several at once) and a
gap-filling ``GapResource``.  Nothing here knows about NeuronCores or networks."""
from .core import NORMAL, URGENT, EmptySchedule, EventQueue, Resource, acquire_all
from .gaps import GapResource

__all__ = ["EmptySchedule", "EventQueue", "GapResource", "NORMAL", "Resource", "URGENT",
           "acquire_all"]
