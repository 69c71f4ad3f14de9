"""The detection input formats: images with their annotated objects (COCO, Pascal VOC, YOLO, the
TF Object Detection API's CSV), each a module, with what they share in ``annotations``."""
