"""A gap-filling resource: a server that takes each job in the earliest idle gap that fits it.

A FIFO ``Resource`` makes a job wait for every earlier one; a server that interleaves many
independent streams (a DMA engine serving its queues round-robin, a network link carrying several
flows) lets a job that is ready early use an idle gap left before later-placed work.  Busy time is
kept as merged ``[start, end)`` intervals.  Nothing here knows about NeuronCores or networks.
"""
from __future__ import annotations

import bisect
from typing import List, Optional

from ..errors import ConfigError


class GapResource:
    """Merged busy intervals; ``place(ready, dur)`` books the earliest gap at or after ``ready``.

    Only the last ``window`` intervals are searched for a gap (older ones are long past or too
    small in a simulation that moves forward; the bound keeps placement O(window)); ``window=None``
    searches them all."""
    __slots__ = ("starts", "ends", "window")

    def __init__(self, window: Optional[int] = None):
        if window is not None and window < 1:
            raise ConfigError("a gap-search window must hold at least one interval",
                              rule="des-window", limit=">= 1", value=window)
        self.starts: List[float] = []
        self.ends: List[float] = []
        self.window = window

    def copy(self) -> "GapResource":
        """An independent resource with the same booked intervals (copy-on-write sharing)."""
        g = GapResource(self.window)
        g.starts = list(self.starts)
        g.ends = list(self.ends)
        return g

    def place(self, ready: float, dur: float) -> float:
        """Book ``dur`` in the earliest gap at or after ``ready``; returns its start."""
        st, en = self.starts, self.ends
        n = len(st)
        if n == 0 or ready >= en[-1]:
            s = ready
            if n and s == en[-1]:
                en[-1] = s + dur
            else:
                st.append(s)
                en.append(s + dur)
            return s
        # first interval ending after ready; try the gaps from there on, looking back at most
        # ``window`` intervals
        j = bisect.bisect_right(en, ready)
        w = self.window
        if w is not None and j < n - w:
            j = n - w
            ready = max(ready, en[j - 1])
        s = ready
        while j < n:
            if s + dur <= st[j]:
                break
            if en[j] > s:
                s = en[j]
            j += 1
        e = s + dur
        if j == n:
            if s == en[-1]:
                en[-1] = e
            else:
                st.append(s)
                en.append(e)
            return s
        # insert [s, e) before interval j, merging with neighbours
        if j > 0 and en[j - 1] == s:
            en[j - 1] = e
            if e == st[j]:
                en[j - 1] = en[j]
                del st[j]
                del en[j]
        elif e == st[j]:
            st[j] = s
        else:
            st.insert(j, s)
            en.insert(j, e)
        return s
