"""A small discrete-event core shared by the timing scheduler and the fabric simulator.

SimPy's core shape: a heap of ``(time, priority, seq, item)``; ``seq`` makes ties FIFO so items are
never compared.  Nothing here knows about NeuronCores or networks."""
from .core import NORMAL, URGENT, EmptySchedule, EventQueue, Resource

__all__ = ["EmptySchedule", "EventQueue", "NORMAL", "Resource", "URGENT"]
