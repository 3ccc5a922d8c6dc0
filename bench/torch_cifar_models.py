"""The five CIFAR-size example models (examples/models/cifar_*.yaml) as PyTorch modules, for
bench/cpu_vs_torch.py. Each module is written the way a PyTorch user would write the network;
the bench checks that its parameter shapes are exactly those the generated program saves
(`train --save`), so both sides train the same network.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def conv_bn_relu(cin, cout, kernel=3, stride=1, pad=1, groups=1, bias=False):
    return [nn.Conv2d(cin, cout, kernel, stride, pad, groups=groups, bias=bias), nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True)]


# ---- cifar_resnet: ResNet-20, projection shortcuts where the size changes -----------------

class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x), inplace=True)


class CifarResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(*conv_bn_relu(3, 16))
        blocks, cin = [], 16
        for width, stride in [(16, 1), (32, 2), (64, 2)]:
            for i in range(3):
                blocks.append(BasicBlock(cin, width, stride if i == 0 else 1))
                cin = width
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# ---- cifar_densenet: DenseNet-BC, k = 12, depth 40 ----------------------------------------

class DenseLayer(nn.Module):
    def __init__(self, cin, growth):
        super().__init__()
        self.norm1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, 4 * growth, 1, bias=False)
        self.norm2, self.conv2 = nn.BatchNorm2d(4 * growth), nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)

    def forward(self, x):
        out = self.conv1(F.relu(self.norm1(x)))
        out = self.conv2(F.relu(self.norm2(out)))
        return torch.cat([x, out], 1)


class Transition(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.norm, self.conv = nn.BatchNorm2d(cin), nn.Conv2d(cin, cout, 1, bias=False)

    def forward(self, x):
        return F.avg_pool2d(self.conv(F.relu(self.norm(x))), 2)


class CifarDenseNet(nn.Module):
    def __init__(self, classes=10, growth=12, layers_per_block=6):
        super().__init__()
        layers, c = [nn.Conv2d(3, 2 * growth, 3, padding=1, bias=False)], 2 * growth
        for block in range(3):
            for _ in range(layers_per_block):
                layers.append(DenseLayer(c, growth))
                c += growth
            if block < 2:
                layers.append(Transition(c, c // 2))
                c //= 2
        layers += [nn.BatchNorm2d(c), nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


# ---- cifar_inception: small GoogLeNet-style network ----------------------------------------

class BasicConv(nn.Sequential):
    def __init__(self, cin, cout, kernel=1):
        super().__init__(*conv_bn_relu(cin, cout, kernel, 1, kernel // 2))


class Inception(nn.Module):
    def __init__(self, cin, ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj):
        super().__init__()
        self.branch1 = BasicConv(cin, ch1x1)
        self.branch2 = nn.Sequential(BasicConv(cin, ch3x3red), BasicConv(ch3x3red, ch3x3, 3))
        self.branch3 = nn.Sequential(BasicConv(cin, ch5x5red), BasicConv(ch5x5red, ch5x5, 3))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, 1, 1), BasicConv(cin, pool_proj))
        self.out_channels = ch1x1 + ch3x3 + ch5x5 + pool_proj

    def forward(self, x):
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class CifarInception(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        stages = [BasicConv(3, 32, 3)]
        c = 32
        plan = [(16, 16, 24, 8, 8, 8), "pool", (32, 32, 48, 8, 16, 16), (32, 32, 48, 8, 16, 16), "pool",
                (64, 48, 96, 16, 32, 32), (64, 48, 96, 16, 32, 32)]
        for item in plan:
            if item == "pool":
                stages.append(nn.MaxPool2d(3, 2, 1))
            else:
                stages.append(Inception(c, *item))
                c = stages[-1].out_channels
        self.features = nn.Sequential(*stages)
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        x = torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1)
        return self.fc(self.dropout(x))


# ---- cifar_mobilenet: MobileNet v1 at width 0.5 -------------------------------------------

class CifarMobileNet(nn.Module):
    # (out channels, stride) of the 13 depthwise-separable blocks.
    CFG = [(32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (256, 1), (256, 1), (256, 1),
           (256, 1), (512, 2), (512, 1)]

    def __init__(self, classes=10):
        super().__init__()
        layers, c = conv_bn_relu(3, 16), 16
        for out, stride in self.CFG:
            layers += conv_bn_relu(c, c, 3, stride, 1, groups=c)  # depthwise
            layers += conv_bn_relu(c, out, 1, 1, 0)               # pointwise
            c = out
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


# ---- cifar_vgg: VGG configuration A at half width, with batchnorm --------------------------

class CifarVgg(nn.Module):
    CFG = [32, "M", 64, "M", 128, 128, "M", 256, 256, "M"]

    def __init__(self, classes=10):
        super().__init__()
        layers, c = [], 3
        for item in self.CFG:
            if item == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += conv_bn_relu(c, item, bias=True)
                c = item
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(c * 2 * 2, 256), nn.ReLU(inplace=True), nn.Dropout(0.5),
                                        nn.Linear(256, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


MODELS = {
    "cifar_resnet": CifarResNet,
    "cifar_densenet": CifarDenseNet,
    "cifar_inception": CifarInception,
    "cifar_mobilenet": CifarMobileNet,
    "cifar_vgg": CifarVgg,
}
