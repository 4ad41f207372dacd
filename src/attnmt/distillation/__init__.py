"""`attnmt distill`: a teacher's translations -> a small student, exported and evaluated, in
resumable stages (stages.py), recorded and checked in one directory (state.py), reported side
by side (report.py)."""

from attnmt.distillation.state import STAGES, Budget, DistillDir, DistillSettings, OutOfTime
from attnmt.distillation.stages import Runtime, resume, start

__all__ = ["STAGES", "Budget", "DistillDir", "DistillSettings", "OutOfTime", "Runtime", "resume", "start"]
