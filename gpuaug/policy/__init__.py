"""gpuaug.policy: random augmentation policies (``gpuaug.Compose``) that fuse into few passes.

``Compose`` and the transforms are also reachable as ``gpuaug.Compose``, ``gpuaug.ColorJitter``
and so on (imported on first use). See :mod:`gpuaug.policy.compose` for the planning rules and
:mod:`gpuaug.policy.transforms` for the transforms.

    >>> import gpuaug
    >>> gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.ColorJitter(0.2)]).plan()[0].kind
    'fused'
"""
from gpuaug.policy.auto import AugMix, AutoAugment, AutoParams, RandAugment, TrivialAugmentWide
from gpuaug.policy.compose import Compose, PolicyParams, Stage
from gpuaug.policy.mixing import CutMix, MixUp, Mosaic
from gpuaug.policy.transforms import (CenterCrop, ColorJitter, GaussianBlur, GaussianNoise, Normalize,
                                      RandomAffine, RandomChannelPermutation, RandomCrop, RandomEqualize,
                                      RandomErasing, RandomGamma, RandomGrayscale, RandomHorizontalFlip,
                                      RandomInvert, RandomPerspective, RandomPosterize, RandomResizedCrop,
                                      RandomRotation, RandomSolarize, RandomVerticalFlip, Resize, ToDtype,
                                      ToLayout, Transform)

__all__ = ["Compose", "PolicyParams", "Stage", "Transform", "RandomHorizontalFlip", "RandomVerticalFlip",
           "RandomRotation", "RandomAffine", "RandomResizedCrop", "RandomPerspective", "Resize", "CenterCrop",
           "RandomCrop", "ColorJitter", "RandomGrayscale", "RandomChannelPermutation", "RandomGamma",
           "RandomSolarize", "RandomPosterize", "RandomInvert", "GaussianBlur", "GaussianNoise", "RandomErasing",
           "RandomEqualize", "Normalize", "ToDtype", "ToLayout",
           "RandAugment", "TrivialAugmentWide", "AutoAugment", "AugMix", "AutoParams", "MixUp", "CutMix", "Mosaic"]
