"""Vision-language-action backbone of the action-chunk policies (`PolicyConfig.backbone = "vla"`)."""

from wmsuite.policies.vla.model import VLADenoiser, VLAPrefix, instruction_tokens

__all__ = ["VLADenoiser", "VLAPrefix", "instruction_tokens"]
