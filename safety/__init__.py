"""Pure, deterministic safety functions: no I/O at call time, nothing imported from the project.

- ``detect(text)``: classifies a message (danger, represailles, detresse, rien) first of all,
  with the cue rules (``rules/``) and the learned linear layer (``weights/model.json``).
- ``normalize(text)``: the canonical form the rules match, with offsets back to the original.
- ``mask_numbers(text)``, ``StreamMasker``: every phone number a model wrote is masked, the
  national short numbers excepted.
- ``render_contacts(text, book)``, ``StreamRenderer``: contacts named by the model, with the
  directory's numbers.
"""

from safety.contacts import StreamRenderer, render_contacts
from safety.detect import Detection, detect
from safety.masking import NATIONAL_NUMBERS, Masked, StreamMasker, mask_numbers
from safety.normalize import Normalized, normalize

__all__ = [
    "NATIONAL_NUMBERS",
    "Detection",
    "Masked",
    "Normalized",
    "StreamMasker",
    "StreamRenderer",
    "detect",
    "mask_numbers",
    "normalize",
    "render_contacts",
]
