"""The debug curriculum as a synthesis template: "verb an object" tasks for the CPU training main job.

``curriculum`` is world-independent: every task starts from the curriculum's own seeds
(:func:`maigym_ray.tasks.curriculum.curriculum_seeds`) and keeps the curriculum's split (held-out tasks pair
a verb and an object that both occur in training, never together) and ids (``cur-<verb>-<object>``), so
synthesise it with one world. What synthesis adds is the path every pool takes: the planner writes each
golden solution from the screens (open the item whose subject or name the instruction quotes, press the
verb's buttons, terminate), and live validation admits the task. The main job trains on that pool.
"""

from __future__ import annotations

import random

from maigym_ray.synth.drafts import Draft, absent, exists, template
from maigym_ray.synth.planner import Click, ClickText, Open, Terminate
from maigym_ray.synth.world import World
from maigym_ray.tasks.curriculum import HELDOUT, MAIL, PEOPLE, VERBS, curriculum_seeds


@template("curriculum", ("mail", "contacts"), default=False)
def curriculum(w: World, rng: random.Random) -> list[Draft]:
    seeds = curriculum_seeds()
    out = []
    for verb in VERBS:
        objects, items, prefix = (
            (MAIL, "messages", "msg-") if verb.app == "mail" else (PEOPLE, "contacts", "contact-")
        )
        for oid, (label, _) in objects.items():
            check = (
                exists(verb.app, items, id=oid, **verb.match)
                if verb.match
                else absent(verb.app, items, id=oid)
            )
            out.append(
                Draft(
                    "curriculum",
                    verb.instruction.format(obj=label),
                    (verb.app,),
                    "state",
                    (check,),
                    (Open(verb.app), ClickText(prefix, label), *(Click(c) for c in verb.clicks), Terminate()),
                    task_id=f"cur-{verb.name}-{oid}",
                    seeds={verb.app: seeds[verb.app]},
                    split="test" if (verb.name, oid) in HELDOUT else "train",
                    tags=("curriculum", verb.name),
                    max_steps=len(verb.clicks) + 4,  # open, the verb's clicks, terminate, and two spare
                )
            )
    return out
