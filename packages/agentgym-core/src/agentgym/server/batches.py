"""How a batch of steps runs over one host's sessions (``EnvHost.step_many``).

Items run in order, one failure lost alone. Every step comes first, then the autoresets the ended
ones asked for, as an in-process loop over many envs runs them (TextCraft: ~2.5 µs a step less than
each reset right after its step). An ended step keeps its session's lock until its reset (nothing
else may step the session between), so the batch never waits for a lock while it holds one: two
batches crossing sessions would wait for each other for ever. A session it finds held (by another
call, or by its own ended step when the batch names the session again) first gets the pending
resets done.
"""

from __future__ import annotations

from typing import Any

from agentgym.server.messages import Answer, StepItem
from agentgym.server.slots import Ended, Guard, plain_call
from agentgym.server.watchdog import Progress


def step_batch(
    host: Any, items: list[StepItem], progress: Progress | None = None, guard: Guard | None = None
) -> list[Answer]:
    """``host``'s answers to ``items``, one each. ``progress``: results as they come, and a stop
    asked by its watcher (see watchdog.py); each item whole, its autoreset included.
    ``guard(host, session, call, arg)``: how each item's call is made (inline.py's watch answers a
    hung one 504); a plain call by default."""
    if progress is not None:
        for item in items:
            if not progress.begin() or not progress.end([host.answer(item)]):
                break
        return progress.out
    call = guard or plain_call
    out: list[Any] = []
    ended: dict[int, int] = {}  # session -> where its Ended waits in out, in item order
    try:
        for item in items:
            result = call(host, item.sid, host.try_step if ended else host.step_one, item)
            if result is None:  # held (by another call, or by ours): wait for it holding none of ours
                _finish(host, out, ended, call)
                result = call(host, item.sid, host.step_one, item)
            if type(result) is Ended:
                ended[item.sid] = len(out)
            out.append(result)
        _finish(host, out, ended, call)
    except BaseException:  # nothing may keep a session's lock on the way out
        for i in ended.values():
            out[i].slot.lock.release()
        raise
    return out


def _finish(host: Any, out: list[Any], ended: dict[int, int], call: Guard) -> None:
    """The pending autoresets of a batch's ended steps, in item order, their locks released."""
    for sid in list(ended):
        i = ended.pop(sid)
        out[i] = call(host, sid, host.finish_autoreset, out[i])
