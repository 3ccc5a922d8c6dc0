#!/usr/bin/python3
"""torchvision's classification models for the import tests
(tests/import/torchvision_test.cpp): each family's model is exported by
PyTorch to ONNX (training graph: batch norm kept, stochastic depth off, batch
2, opset 17, no weights stored) and by tools/mplan_export.py to model YAML;
counts.json holds each module's parameter count and torchvision's published
one (the weights' meta["num_params"]).

  torchvision_models.py OUT_DIR [NAME...]
"""
import json
import os
import sys
import time
import warnings

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import mplan_export  # noqa: E402

# name: (constructor arguments, input size). GoogLeNet and Inception v3 without
# their auxiliary classifiers (a second loss mplan does not model); small
# inputs where the model takes them (AlexNet, VGG and ViT need 224: their
# adaptive pooling or position embedding fixes it).
FAMILIES = {
    "alexnet": ({}, 224),
    "vgg16": ({}, 224),
    "resnet50": ({}, 64),
    "resnext50_32x4d": ({}, 64),
    "wide_resnet50_2": ({}, 64),
    "densenet121": ({}, 64),
    "googlenet": ({"aux_logits": False, "init_weights": False}, 64),
    "inception_v3": ({"aux_logits": False, "init_weights": False}, 96),
    "mobilenet_v2": ({}, 64),
    "mobilenet_v3_large": ({}, 64),
    "efficientnet_b0": ({}, 64),
    "regnet_y_400mf": ({}, 64),
    "shufflenet_v2_x1_0": ({}, 64),
    "convnext_tiny": ({}, 64),
    "vit_b_16": ({}, 224),
}


def published(name):
    try:
        return torchvision.models.get_model_weights(name).DEFAULT.meta["num_params"]
    except Exception:  # noqa: BLE001 - an older torchvision
        return None


def main(out, names):
    warnings.simplefilter("ignore")
    os.makedirs(out, exist_ok=True)
    counts = {}
    for name in names or FAMILIES:
        kwargs, size = FAMILIES[name]
        start = time.time()
        model = getattr(torchvision.models, name)(**kwargs)
        # A training graph: batch norm stays (an eval export folds it into the
        # convs); stochastic depth (EfficientNet, ConvNeXt) in eval mode, the
        # identity, as ONNX has no random op it could export it as.
        model.train()
        for m in model.modules():
            if type(m).__name__ == "StochasticDepth":
                m.eval()
        torch.onnx.export(model, torch.randn(2, 3, size, size), os.path.join(out, name + ".onnx"), export_params=False,
                          opset_version=17, training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
        text, _, _ = mplan_export.export(model, [3, size, size], 4, name=name)
        with open(os.path.join(out, name + ".yaml"), "w") as f:
            f.write(text)
        counts[name] = {"parameters": sum(p.numel() for p in model.parameters()), "published": published(name),
                        "input": size}
        print("%s: %d parameters, %.1fs" % (name, counts[name]["parameters"], time.time() - start), flush=True)
    with open(os.path.join(out, "counts.json"), "w") as f:
        json.dump(counts, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
