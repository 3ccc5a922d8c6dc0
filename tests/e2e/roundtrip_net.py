"""A small PyTorch CNN for the export round trip (tests/e2e/torch_roundtrip_test.cpp):
convolutions with biases, batch norm (running statistics), max pooling and a
linear layer; no dropout, so a forward pass is a function of the weights."""
import torch
from torch import nn


def make_net():
    torch.manual_seed(11)
    return nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 5))


def main():
    """usage: roundtrip_net.py STATE_DICT DATA_DIR FIRST COUNT [eval]: prints the
    mean cross-entropy of samples FIRST .. FIRST+COUNT-1 in training mode
    (batch statistics, as the program's step computes its loss), or with
    `eval` in evaluation mode (running statistics, as the program's
    evaluation), then the top-1 accuracy."""
    import sys
    import numpy as np
    net = make_net()
    net.load_state_dict(torch.load(sys.argv[1]))
    evaluation = len(sys.argv) > 5 and sys.argv[5] == "eval"
    net.train(not evaluation)
    first, count = int(sys.argv[3]), int(sys.argv[4])
    images = np.load(sys.argv[2] + "/images.npy")[first:first + count]
    labels = np.load(sys.argv[2] + "/labels.npy")[first:first + count]
    with torch.no_grad():
        logits = net(torch.tensor(images))
        loss = nn.functional.cross_entropy(logits, torch.tensor(labels).long())
    print("%.9g" % loss.item())
    if evaluation:
        print("top1 %.9g" % (logits.argmax(dim=1) == torch.tensor(labels).long()).float().mean().item())


if __name__ == "__main__":
    main()
