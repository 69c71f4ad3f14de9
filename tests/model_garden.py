"""TensorFlow Model Garden (pip ``tf-models-official``) as an outside oracle for detection records:
its COCO converter (``official/vision/data/create_coco_tf_record.py``) and the decoder its
detection models read records with (``official/vision/dataloaders/tf_example_decoder.py``).

Model Garden is installed with ``--no-deps`` (scripts/test.sh): its package ``__init__``s import
every model config, and those need orbit, gin, sentencepiece and more. ``install()`` registers
empty packages pointing at the installed folders instead, so only the modules asked for (and
what they import: TensorFlow, tf_keras, absl, pycocotools) are loaded.

Run as a script it is Model Garden's converter command line, as a user runs it
(``python tests/model_garden.py --image_dir ... --object_annotations_file ... --include_masks``),
which is how scripts/bench_detection.py times it.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

# The packages whose __init__ would pull in the model zoo; the modules under them import normally.
PACKAGES = ("official", "official.vision", "official.vision.data", "official.vision.dataloaders")


def install() -> None:
    """Registers Model Garden's packages as empty modules over the installed folders; idempotent."""
    if all(name in sys.modules for name in PACKAGES):
        return
    spec = importlib.util.find_spec("official")  # finds the folder without running official/__init__.py
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("Model Garden is not installed: pip install --no-deps tf-models-official==2.20.0")
    root = Path(next(iter(spec.submodule_search_locations)))
    for name in PACKAGES:
        if name in sys.modules:
            continue
        module = types.ModuleType(name)
        module.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
        module.__package__ = name
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)


def converter() -> Any:
    """``official.vision.data.create_coco_tf_record``: its absl flags are defined on import."""
    install()
    from official.vision.data import create_coco_tf_record

    return create_coco_tf_record


def decoder(include_mask: bool = True) -> Any:
    """Model Garden's ``TfExampleDecoder``, as its Mask R-CNN input pipeline builds it."""
    install()
    from official.vision.dataloaders import tf_example_decoder

    return tf_example_decoder.TfExampleDecoder(include_mask=include_mask)


def preprocess_ops() -> Any:
    """``official.vision.ops.preprocess_ops``, whose ``resize_and_crop_image``, ``_boxes`` and
    ``_masks`` its RetinaNet and Mask R-CNN input pipelines size images with. Its ``augment``
    import (RandAugment and the like, which needs gin) is an empty module: none of those use it."""
    install()
    sys.modules.setdefault("official.vision.ops.augment", types.ModuleType("official.vision.ops.augment"))
    from official.vision.ops import preprocess_ops as ops

    return ops


def convert(annotations: Path, image_dir: Path, prefix: Path, include_masks: bool = True) -> Path:
    """Model Garden's converter run in this process (no pool) into one shard; returns its path."""
    module = converter()
    from absl import flags
    from absl.testing import flagsaver

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()  # the defaults, as `app.run` with no arguments leaves them
    prefix.parent.mkdir(parents=True, exist_ok=True)  # as its main() does
    with flagsaver.flagsaver(num_processes=0):  # 0: no multiprocessing (a fork of a process that holds TensorFlow can hang)
        module._create_tf_record_from_coco_annotations(
            str(annotations), [str(image_dir)], str(prefix), 1, object_annotations_file=str(annotations), include_masks=include_masks
        )
    return Path(f"{prefix}-00000-of-00001.tfrecord")


def main() -> None:
    """Model Garden's ``create_coco_tf_record.py`` command line."""
    module = converter()
    from absl import app

    app.run(module.main)


if __name__ == "__main__":
    main()
