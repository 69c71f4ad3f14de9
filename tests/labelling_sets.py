"""Label Studio and LabelMe exports written the way the tools write them, for tests.

Label Studio's JSON export (Export > JSON): a top-level array of tasks with Label Studio's own
fields (``id``, ``data``, ``annotations`` with ``result``, ``was_cancelled``, ``ground_truth``,
``created_at``; ``predictions``; ``meta``, ``project``...), regions in percent of the image with
``original_width``/``original_height``, uploaded images named ``/data/upload/<project>/<hash>-<name>``.
LabelMe: one JSON per image beside it, as ``LabelFile.save`` writes it (``indent=2``,
``ensure_ascii=False``; ``version``, ``flags``, ``shapes``, ``imagePath``, ``imageData``,
``imageHeight``, ``imageWidth``; a shape's ``label``, ``points``, ``group_id``, ``description``,
``shape_type``, ``flags``, ``mask``).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from tests.detection_sets import photo

# -- Label Studio ---------------------------------------------------------------------------------


def ls_rectangle(
    region_id: str, label: str, x: float, y: float, w: float, h: float, size: tuple[int, int], rotation: float = 0
) -> dict[str, Any]:
    return {
        "original_width": size[0],
        "original_height": size[1],
        "image_rotation": 0,
        "value": {"x": x, "y": y, "width": w, "height": h, "rotation": rotation, "rectanglelabels": [label]},
        "id": region_id,
        "from_name": "label",
        "to_name": "image",
        "type": "rectanglelabels",
        "origin": "manual",
    }


def ls_polygon(region_id: str, label: str, points: list[list[float]], size: tuple[int, int]) -> dict[str, Any]:
    return {
        "original_width": size[0],
        "original_height": size[1],
        "image_rotation": 0,
        "value": {"points": points, "closed": True, "polygonlabels": [label]},
        "id": region_id,
        "from_name": "polygon",
        "to_name": "image",
        "type": "polygonlabels",
        "origin": "manual",
    }


def ls_annotation(annotation_id: int, task_id: int, result: list[dict[str, Any]], created: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": annotation_id,
        "completed_by": 1,
        "result": result,
        "was_cancelled": False,
        "ground_truth": False,
        "created_at": created,
        "updated_at": created,
        "draft_created_at": None,
        "lead_time": 12.5,
        "prediction": {},
        "result_count": 0,
        "unique_id": f"5c1e0b0a-{annotation_id:04d}",
        "import_id": None,
        "last_action": None,
        "task": task_id,
        "project": 3,
        "updated_by": 1,
        "parent_prediction": None,
        "parent_annotation": None,
        "last_created_by": None,
        **fields,
    }


def ls_task(task_id: int, image: str, annotations: list[dict[str, Any]], predictions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "id": task_id,
        "annotations": annotations,
        "file_upload": image.rsplit("/", 1)[-1],
        "drafts": [],
        "predictions": predictions or [],
        "data": {"image": image},
        "meta": {},
        "created_at": "2024-05-01T09:00:00.000000Z",
        "updated_at": "2024-05-01T10:00:00.000000Z",
        "inner_id": task_id,
        "total_annotations": len(annotations),
        "cancelled_annotations": sum(a["was_cancelled"] for a in annotations),
        "total_predictions": len(predictions or []),
        "comment_count": 0,
        "unresolved_comment_count": 0,
        "last_comment_updated_at": None,
        "project": 3,
        "updated_by": 1,
        "comment_authors": [],
    }


def write_label_studio(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tasks, ensure_ascii=False, indent=2))
    return path


# -- LabelMe --------------------------------------------------------------------------------------


def lm_shape(label: str, points: list[list[float]], shape_type: str, group_id: int | None = None) -> dict[str, Any]:
    return {"label": label, "points": points, "group_id": group_id, "description": "", "shape_type": shape_type, "flags": {}, "mask": None}


def write_labelme(folder: Path, name: str, size: tuple[int, int], shapes: list[dict[str, Any]], seed: int = 0,
                  embed: bool = False, image_path: str | None = None) -> Path:  # fmt: skip
    """``folder/name`` (an image, written) and its LabelMe file beside it; returns the JSON's path."""
    folder.mkdir(parents=True, exist_ok=True)
    image = folder / name
    photo(image, size[0], size[1], seed)
    document = {
        "version": "5.5.0",
        "flags": {},
        "shapes": shapes,
        "imagePath": name if image_path is None else image_path,
        "imageData": base64.b64encode(image.read_bytes()).decode("utf-8") if embed else None,
        "imageHeight": size[1],
        "imageWidth": size[0],
    }
    target = folder / (name.rsplit(".", 1)[0] + ".json")
    target.write_text(json.dumps(document, ensure_ascii=False, indent=2), encoding="utf-8")
    return target
