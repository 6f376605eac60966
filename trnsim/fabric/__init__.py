"""Multi-chip fabrics: topologies as data (NeuronLink tori, NeuronSwitch, NVLink/NVSwitch domains, EFA /
InfiniBand), the collective runtimes (Neuron, NCCL), collective algorithms, a flow-level network simulator.

Needs only ``hardware`` and ``des`` below it, so the model layer can cost its collectives here."""
from .alltoallv import alltoallv
from .collectives import CollectiveResult, bus_factor, canonical_op, collective, ranks_for_count
from .comm import FabricComm
from .config import FabricConfig, load_fabric_config
from .table import CollectiveRow, collective_table, links_used
from .topology import Topology, build_topology, system_names
from .units import format_size, parse_size, parse_sweep

__all__ = ["CollectiveResult", "CollectiveRow", "alltoallv", "collective_table", "links_used", "FabricComm", "FabricConfig", "Topology", "build_topology", "bus_factor",
           "canonical_op", "collective", "format_size", "load_fabric_config", "parse_size", "parse_sweep",
           "ranks_for_count", "system_names"]
