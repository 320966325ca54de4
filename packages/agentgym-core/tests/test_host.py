"""``EnvHost``'s batched steps, below HTTP: what a batch does, in what order."""

from __future__ import annotations

import pytest

from agentgym.server.host import EnvHost
from agentgym.server.inline import InlineWatch, step_inline
from agentgym.server.messages import ResetTo, StepItem


@pytest.mark.parametrize("inline", [False, True], ids=["pool thread", "inline, watched"])
def test_a_batch_steps_every_session_before_the_autoresets_its_ended_steps_asked_for(inline):
    """All of a batch's steps first, then the autoresets (as an in-process loop over many envs runs
    them): each item's answer is what stepping then resetting it alone answers, and every session's
    lock is free afterwards."""
    import json

    import agentgym

    host, log = EnvHost(["guess"]), []
    for sid in (1, 2, 3):
        host.create(sid, "guess", 5, None)
        env = host.slots[sid].env
        step, reset = env.step, env.reset
        env.step = lambda a, sid=sid, step=step: (log.append((sid, "step")), step(a))[1]
        env.reset = lambda *a, sid=sid, reset=reset, **k: (log.append((sid, "reset")), reset(*a, **k))[1]
    target = host.slots[1].env.target
    batch = [
        StepItem(1, f"guess {target}", ResetTo(7)),
        StepItem(2, "guess 1", ResetTo(7)),
        StepItem(3, f"guess {target}"),
    ]
    out = step_inline(host, batch, InlineWatch(30.0)) if inline else host.step_many(batch)

    assert log == [(1, "step"), (2, "step"), (3, "step"), (1, "reset")]
    reference = agentgym.make("guess")
    reference.reset(options={"task_id": 5})
    *_, info = reference.step(f"guess {target}")
    first, first_info = reference.reset(options={"task_id": 7})
    ended, going, no_reset = (json.loads(o["json"]) for o in out)
    assert ended["terminated"] and ended["info"] == info
    assert ended["reset"] == {"observation": first, "info": first_info}
    assert "reset" not in going and not going["terminated"]  # asked for, not ended: none
    assert no_reset["terminated"] and "reset" not in no_reset  # ended, none asked for
    assert not any(slot.lock.locked() for slot in host.slots.values())
    assert host.slots[3].done and not host.slots[1].done  # session 1 holds its new episode


@pytest.mark.parametrize("inline", [False, True], ids=["pool thread", "inline, watched"])
def test_a_session_named_again_after_its_ended_step_is_reset_before_it_steps_again(inline):
    """A batch may name a session twice: when its first step ends the episode and asks for an
    autoreset, that reset comes before the second step (items run in order), which steps the new
    episode, instead of waiting forever for the lock the ended step holds until its reset."""
    import json
    import threading

    host = EnvHost(["guess"])
    host.create(1, "guess", 5, None)
    target = host.slots[1].env.target
    batch = [
        StepItem(1, f"guess {target}", ResetTo(7)),
        StepItem(1, "guess 1", ResetTo(8)),
        StepItem(1, "guess 2"),
    ]
    out: list = []
    run = (lambda: step_inline(host, batch, InlineWatch(30.0))) if inline else (lambda: host.step_many(batch))
    worker = threading.Thread(target=lambda: out.append(run()), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "the batch deadlocked on the session's lock"
    ended, second, third = (json.loads(o["json"]) for o in out[0])
    assert ended["terminated"] and ended["reset"]["info"]["task_id"] == 7
    assert second["info"]["task_id"] == 7 and not second["terminated"] and "reset" not in second
    assert third["info"]["task_id"] == 7 and "2" in third["observation"]
    assert not host.slots[1].lock.locked()


def test_two_batches_crossing_sessions_do_not_wait_for_each_other():
    """Batch A ends session 1's episode (keeping its lock until the autoreset) and then names
    session 2, which batch B, at the same time, has ended and holds: each would wait for the other
    for ever. A batch never waits for a lock while it holds one: it does its pending resets first,
    so both finish, each stepping the other's session on its new episode."""
    import json
    import threading

    host = EnvHost(["guess"])
    stepped = {1: threading.Event(), 2: threading.Event()}
    for sid, other in ((1, 2), (2, 1)):
        host.create(sid, "guess", 5, None)
        env = host.slots[sid].env
        real = env.step

        def step(action, real=real, sid=sid, other=other, env=env):
            env.step = real  # the first step only: both batches inside their first step at once
            out = real(action)
            stepped[sid].set()
            assert stepped[other].wait(10)
            return out

        env.step = step
    target = host.slots[1].env.target
    batches = {
        "a": [StepItem(1, f"guess {target}", ResetTo(7)), StepItem(2, "guess 1")],
        "b": [StepItem(2, f"guess {target}", ResetTo(8)), StepItem(1, "guess 1")],
    }
    out: dict[str, list] = {}
    threads = [
        threading.Thread(target=lambda k=k: out.__setitem__(k, host.step_many(batches[k])), daemon=True)
        for k in batches
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    assert not any(thread.is_alive() for thread in threads), "the two batches deadlocked"
    (a_ended, a_other), (b_ended, b_other) = ([json.loads(o["json"]) for o in out[k]] for k in "ab")
    assert a_ended["reset"]["info"]["task_id"] == 7 and b_ended["reset"]["info"]["task_id"] == 8
    assert a_other["info"]["task_id"] == 8 and b_other["info"]["task_id"] == 7
    assert not any(slot.lock.locked() for slot in host.slots.values())
