"""The pushing tasks' scripted experts: PushCube's (go round the cube to the point behind it on the
goal line, then push along that line) and PushTwoCubes' (the same, one cube at a time). Built by
`make_expert` (envs/experts.py), which says what their skill and failure modes do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from wmsuite.envs.expert_base import ScriptedExpert
from wmsuite.envs.push_cube import ACTION_SCALE as PC_SCALE
from wmsuite.envs.push_cube import CUBE_HALF as PC_CUBE_HALF
from wmsuite.envs.push_cube import GOAL_RADIUS


class PushCubeExpert(ScriptedExpert):
    """Go round the cube to the point behind it on the goal line, then push along that line."""

    ENV_ID = "wmsuite/PushCube-v0"
    AGENT_POS_DIM = 2
    ENV_STATE_DIM = 6
    ACTION_DIM = 2
    MOTION_DIM = 2
    MOTION_SCALE = PC_SCALE
    FAILURE_MODES = ("wrong_side", "freeze", "early_stop")
    EXTRA_MODES = ("hover", "poke")
    CONTACT = PC_CUBE_HALF + 0.02  # m, pusher centre to cube centre when touching a face
    PUSH_STEP = 0.02  # m per step while pushing
    CLEAR = 0.085  # m, sideways clearance when going round the cube

    def _begin(self, mem: dict[str, Any], rng: np.random.Generator) -> None:
        mem["done"] = False
        mem["pushing"] = False
        # Where the expert believes the cube has arrived (a competent one: well inside the goal).
        mem["stop_dist"] = rng.uniform(0.09, 0.13) if mem["mode"] == "early_stop" else 0.4 * GOAL_RADIUS
        if mem["mode"] == "hover":
            mem["standoff"] = 0.0  # pusher centre to cube centre; drawn with the angle at the first step
            mem["redraw"] = 0
        mem["stroke"] = None  # poke: the stroke under way (drawn when the last one ends)

    def _hover(self, pusher: np.ndarray, cube: np.ndarray, d: np.ndarray, mem: dict[str, Any]) -> np.ndarray:
        """The hover mode's target: a stand-off point 1-5 cm short of touching the cube, within 1.2 rad of
        the back of the push line, redrawn every 6-15 steps. The pusher goes there along an arc round the
        cube (at most 0.4 rad a step), so it never cuts across the cube."""
        rng = mem["rng"]
        if mem["redraw"] <= 0:
            mem["standoff"] = self.CONTACT + rng.uniform(0.01, 0.05)
            mem["angle"] = rng.uniform(-1.2, 1.2)
            mem["redraw"] = int(rng.integers(6, 16))
        mem["redraw"] -= 1
        rel = pusher - cube
        back = np.arctan2(-d[1], -d[0])
        now = np.arctan2(rel[1], rel[0]) - back
        angle = back + now + np.clip(np.angle(np.exp(1j * (mem["angle"] - now))), -0.4, 0.4)
        return cube + mem["standoff"] * np.array([np.cos(angle), np.sin(angle)])

    POKE_START = 0.09  # m, stroke start: this far from the cube's centre (clear of it)

    def _poke(self, pusher: np.ndarray, cube: np.ndarray, mem: dict[str, Any]) -> np.ndarray:
        """The poke mode's action: strokes along a line fixed when drawn, from a side at a random angle,
        offset sideways from the cube's centre by up to 4.5 cm (head-on to grazing), at a constant speed
        of 0.3-1 of full, running 1-10 cm past first touch; the pusher goes round the cube to each start."""
        rng, st = mem["rng"], mem["stroke"]
        if st is None or st["steps"] > 40:
            theta = rng.uniform(-np.pi, np.pi)
            side = np.array([np.cos(theta), np.sin(theta)])  # from the cube towards the start
            perp = np.array([-side[1], side[0]])
            st = mem["stroke"] = {"side": side, "start": cube + self.POKE_START * side + rng.uniform(-0.045, 0.045) * perp,
                                  "speed": rng.uniform(0.3, 1.0), "steps": 0, "go": False,
                                  "length": self.POKE_START - self.CONTACT + rng.uniform(0.01, 0.10)}
        st["steps"] += 1
        if not st["go"]:
            to_start = st["start"] - pusher
            if float(np.linalg.norm(to_start)) < 0.012:
                st["go"], st["origin"] = True, pusher.copy()
            else:  # go round the cube at the start's distance, at most 0.6 rad a step
                rel, aim = pusher - cube, st["start"] - cube
                now, want = np.arctan2(rel[1], rel[0]), np.arctan2(aim[1], aim[0])
                turn = np.angle(np.exp(1j * (want - now)))
                if abs(turn) < 0.6:
                    target = st["start"]
                else:
                    phi = now + np.sign(turn) * 0.6
                    target = cube + max(float(np.linalg.norm(aim)), self.CLEAR) * np.array([np.cos(phi), np.sin(phi)])
                return np.clip((target - pusher) / PC_SCALE, -1.0, 1.0)
        if float((pusher - st["origin"]) @ -st["side"]) >= st["length"]:
            mem["stroke"] = None  # done: the next step draws a new stroke
        return -st["speed"] * st["side"]

    def _act(self, agent_pos: np.ndarray, env_state: np.ndarray, mem: dict[str, Any]) -> np.ndarray | None:
        pusher, cube, goal = agent_pos[:2], env_state[:2], env_state[4:6]
        if mem["mode"] == "poke":
            return self._poke(pusher, cube, mem)
        to_goal = goal - cube
        dist = float(np.linalg.norm(to_goal))
        if mem["done"] or dist < mem["stop_dist"]:
            mem["done"] = mem["mode"] == "early_stop"  # the early stopper never looks again
            return None
        d = to_goal / dist  # push direction
        if mem["mode"] == "wrong_side":
            d = -d
        perp = np.array([-d[1], d[0]])
        rel = pusher - cube
        along, lateral = float(rel @ d), float(rel @ perp)
        if mem["pushing"] and (abs(lateral) > 0.03 or along > -0.03):
            mem["pushing"] = False  # slipped off the cube's back face
        if not mem["pushing"] and abs(lateral) < 0.012 and -0.08 < along < -0.035:
            mem["pushing"] = True  # lined up behind the cube
        angle_to_behind = float(np.angle(np.exp(1j * (np.arctan2(lateral, along) - np.pi))))  # (-pi, pi]
        if mem["mode"] == "hover" and abs(angle_to_behind) < 1.3:  # near its side of the cube: stand off
            target = self._hover(pusher, cube, d, mem)
        elif mem["pushing"]:
            target = cube - d * (self.CONTACT - self.PUSH_STEP)
        elif abs(angle_to_behind) < 0.5:  # roughly behind: go to the line-up point
            target = cube - d * (self.CONTACT + 0.02)
        else:  # go round the cube on a circle, at most 0.6 rad at a time
            phi = np.arctan2(lateral, along) - np.sign(angle_to_behind) * 0.6
            target = cube + self.CLEAR * (np.cos(phi) * d + np.sin(phi) * perp)
        return np.clip((target - pusher) / PC_SCALE, -1.0, 1.0)


class PushTwoCubesExpert(PushCubeExpert):
    """PushCube's expert, one cube at a time: first the cube whose push line (from the cube to its
    goal) passes farther from the other cube, then the other, and back to the first if the second
    push knocked it out of its goal. Its extra failure mode one_cube believes the task done once the
    first cube is in (a long-horizon mistake: half the work)."""

    ENV_ID = "wmsuite/PushTwoCubes-v0"
    ENV_STATE_DIM = 12
    FAILURE_MODES = ("wrong_side", "freeze", "early_stop", "one_cube")

    def _begin(self, mem: dict[str, Any], rng: np.random.Generator) -> None:
        super()._begin(mem, rng)
        mem["target"] = None  # the cube being pushed (0 red, 1 green), chosen at the first step

    def _act(self, agent_pos: np.ndarray, env_state: np.ndarray, mem: dict[str, Any]) -> np.ndarray | None:
        cubes, goals = (env_state[0:4], env_state[4:8]), (env_state[8:10], env_state[10:12])
        if mem["target"] is None:
            mem["target"] = int(np.argmax([_clearance(cubes[i][:2], goals[i], cubes[1 - i][:2]) for i in (0, 1)]))
        t = mem["target"]
        arrived = [float(np.linalg.norm(c[:2] - g)) < mem["stop_dist"] for c, g in zip(cubes, goals)]
        if arrived[t] and not mem["done"]:
            if mem["mode"] == "one_cube" or arrived[1 - t]:
                mem["done"] = mem["mode"] == "one_cube"  # one_cube never looks again
                return None
            t = mem["target"] = 1 - t
            mem["pushing"] = False
        return super()._act(agent_pos, np.concatenate([cubes[t], goals[t]]), mem)


def _clearance(start: np.ndarray, end: np.ndarray, point: np.ndarray) -> float:
    """Distance from `point` to the segment start-end (all (2,))."""
    seg = end - start
    u = float(np.clip((point - start) @ seg / max(float(seg @ seg), 1e-12), 0.0, 1.0))
    return float(np.linalg.norm(start + u * seg - point))


class PushCubeEgoExpert(PushCubeExpert):
    """PushCube's expert on the large table, seen through the riding camera: first it goes to look at
    the goal (scouting, round the cube if the cube is in the way), then it pushes the cube there, which
    brings the camera back to the goal after it has left it. Its extra failure mode
    misremembers pushes the cube to a point 15-25 cm off the goal (what an agent that forgot where
    the goal was would do)."""

    ENV_ID = "wmsuite/PushCubeEgo-v0"
    FAILURE_MODES = ("wrong_side", "freeze", "early_stop", "misremember")
    SCOUTED = 0.05  # m, pusher to goal centre at which the goal counts as seen
    CRUISE = 0.8  # the scouting move's largest action norm (of the pusher's full speed)

    def _begin(self, mem: dict[str, Any], rng: np.random.Generator) -> None:
        super()._begin(mem, rng)
        mem["scouted"] = False
        angle = rng.uniform(-np.pi, np.pi)
        mem["goal_error"] = (rng.uniform(0.15, 0.25) * np.array([np.cos(angle), np.sin(angle)])
                             if mem["mode"] == "misremember" else np.zeros(2))

    def _act(self, agent_pos: np.ndarray, env_state: np.ndarray, mem: dict[str, Any]) -> np.ndarray | None:
        pusher, cube, goal = agent_pos[:2], env_state[:2], env_state[4:6]
        if not mem["scouted"]:
            if float(np.linalg.norm(goal - pusher)) < self.SCOUTED:
                mem["scouted"] = True
            else:
                target = goal
                if _clearance(pusher, goal, cube) < 0.09:  # the cube is in the way: pass beside it
                    side = pusher - cube - ((pusher - cube) @ (goal - pusher)) * (goal - pusher) / max(
                        float((goal - pusher) @ (goal - pusher)), 1e-12)
                    norm = float(np.linalg.norm(side))
                    side = side / norm if norm > 1e-6 else np.array([-(goal - pusher)[1], (goal - pusher)[0]]) / max(
                        float(np.linalg.norm(goal - pusher)), 1e-12)
                    target = cube + 0.12 * side
                move = (target - pusher) / PC_SCALE
                return move * min(1.0, self.CRUISE / max(float(np.linalg.norm(move)), 1e-12))
        remembered = np.clip(goal + mem["goal_error"], -0.4, 0.4)
        return super()._act(agent_pos, np.concatenate([env_state[:4], remembered]), mem)


class PushColorsExpert(PushCubeExpert):
    """PushCube's expert on the cube and goal the instruction names (environment_state's one-hots).
    Its extra failure mode wrong_cube pushes another cube than the named one into the named goal: what
    a policy that does not ground the instruction's colour does."""

    ENV_ID = "wmsuite/PushColors-v0"
    ENV_STATE_DIM = 21
    FAILURE_MODES = ("wrong_side", "freeze", "early_stop", "wrong_cube")

    def _begin(self, mem: dict[str, Any], rng: np.random.Generator) -> None:
        super()._begin(mem, rng)
        mem["swap"] = int(rng.integers(1, 3))  # wrong_cube: the cube this many places after the named one

    def _act(self, agent_pos: np.ndarray, env_state: np.ndarray, mem: dict[str, Any]) -> np.ndarray | None:
        cube = int(np.argmax(env_state[16:19]))
        goal = int(np.argmax(env_state[19:21]))
        if mem["mode"] == "wrong_cube":
            cube = (cube + mem["swap"]) % 3
        return super()._act(agent_pos, np.concatenate([env_state[4 * cube : 4 * cube + 4],
                                                       env_state[12 + 2 * goal : 14 + 2 * goal]]), mem)
