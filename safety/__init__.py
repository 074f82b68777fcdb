"""Pure, deterministic safety functions: no I/O at call time, nothing imported from the project.

- ``detect(text)``: classifies a message (danger, represailles, detresse, rien) first of all.
- ``normalize(text)``: the canonical form the rules match, with offsets back to the original.
"""

from safety.detect import Detection, detect
from safety.normalize import Normalized, normalize

__all__ = ["Detection", "Normalized", "detect", "normalize"]
