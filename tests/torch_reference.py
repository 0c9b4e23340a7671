"""PyTorch references for the conversion tests, in plain torch.nn (torchvision's wheels are CUDA
builds): torchvision's VideoResNet (r3d_18, r2plus1d_18) and ResNet, Hara et al.'s R3D-50, the
I3D-ResNet-50 of pytorch-resnet3d (TeD-SPAD's and the penalty paper's f_T) and milesial's UNet,
with their module names (so their state dicts have the real keys) and widths as arguments, so
the tests run them small. benchmarks/train_step_torch.py imports them too."""

import torch
from torch import nn


def _bn3d(width):
    return nn.BatchNorm3d(width)


class Conv3DSimple(nn.Conv3d):
    def __init__(self, in_planes, out_planes, midplanes=None, stride=1):
        super().__init__(in_planes, out_planes, 3, stride=stride, padding=1, bias=False)


class Conv3DNoTemporal(nn.Conv3d):
    def __init__(self, in_planes, out_planes, midplanes=None, stride=1):
        super().__init__(
            in_planes, out_planes, (1, 3, 3), (1, stride, stride), (0, 1, 1), bias=False
        )


class Conv2Plus1D(nn.Sequential):
    def __init__(self, in_planes, out_planes, midplanes, stride=1):
        super().__init__(
            nn.Conv3d(in_planes, midplanes, (1, 3, 3), (1, stride, stride), (0, 1, 1), bias=False),
            _bn3d(midplanes),
            nn.ReLU(inplace=True),
            nn.Conv3d(midplanes, out_planes, (3, 1, 1), (stride, 1, 1), (1, 0, 0), bias=False),
        )


class VideoBasicBlock(nn.Module):
    def __init__(self, inplanes, planes, conv_builder, stride=1, downsample=None):
        super().__init__()
        midplanes = (inplanes * planes * 27) // (inplanes * 9 + 3 * planes)
        self.conv1 = nn.Sequential(
            conv_builder(inplanes, planes, midplanes, stride), _bn3d(planes), nn.ReLU(inplace=True)
        )
        self.conv2 = nn.Sequential(conv_builder(planes, planes, midplanes), _bn3d(planes))
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        residual = x if self.downsample is None else self.downsample(x)
        return self.relu(self.conv2(self.conv1(x)) + residual)


class VideoResNet(nn.Module):
    """torchvision.models.video.VideoResNet with BasicBlocks (r3d_18, r2plus1d_18, and mc3_18
    with `mixed=True`: stages after the first convolve 1x3x3, shortcuts stride (1, s, s));
    `spact=True` (r3d_18 only) patches layer4 as SPAct's code does: first conv stride
    (1, 2, 2), padding (2, 1, 1), dilation (2, 1, 1), shortcut stride (1, 2, 2)."""

    def __init__(
        self,
        factorized=False,
        widths=(64, 128, 256, 512),
        blocks=(2, 2, 2, 2),
        stem_mid=45,
        num_classes=400,
        spact=False,
        mixed=False,
    ):
        super().__init__()
        stem_width = widths[0]
        if factorized:
            self.stem = nn.Sequential(
                nn.Conv3d(3, stem_mid, (1, 7, 7), (1, 2, 2), (0, 3, 3), bias=False),
                _bn3d(stem_mid),
                nn.ReLU(inplace=True),
                nn.Conv3d(stem_mid, stem_width, (3, 1, 1), 1, (1, 0, 0), bias=False),
                _bn3d(stem_width),
                nn.ReLU(inplace=True),
            )
        else:
            self.stem = nn.Sequential(
                nn.Conv3d(3, stem_width, (3, 7, 7), (1, 2, 2), (1, 3, 3), bias=False),
                _bn3d(stem_width),
                nn.ReLU(inplace=True),
            )
        inplanes = stem_width
        for stage, (width, count) in enumerate(zip(widths, blocks)):
            builder = Conv2Plus1D if factorized else Conv3DSimple
            if mixed and stage > 0:
                builder = Conv3DNoTemporal
            layers = []
            for block in range(count):
                stride = 2 if stage > 0 and block == 0 else 1
                downsample = None
                if stride != 1 or inplanes != width:
                    ds_stride = (1, stride, stride) if builder is Conv3DNoTemporal else stride
                    downsample = nn.Sequential(
                        nn.Conv3d(inplanes, width, 1, stride=ds_stride, bias=False), _bn3d(width)
                    )
                layers.append(VideoBasicBlock(inplanes, width, builder, stride, downsample))
                inplanes = width
            setattr(self, f"layer{stage + 1}", nn.Sequential(*layers))
        if spact:
            block = self.layer4[0]
            block.conv1[0] = nn.Conv3d(
                widths[2], widths[3], 3, (1, 2, 2), (2, 1, 1), (2, 1, 1), bias=False
            )
            block.downsample[0] = nn.Conv3d(widths[2], widths[3], 1, (1, 2, 2), bias=False)
        self.avgpool = nn.AdaptiveAvgPool3d(1)
        self.fc = nn.Linear(inplanes, num_classes)

    def forward(self, x):
        x = self.stem(x)
        for stage in range(1, 5):
            x = getattr(self, f"layer{stage}")(x)
        return self.fc(self.avgpool(x).flatten(1))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, conv, bn, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = bn(planes)
        self.conv2 = conv(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = bn(planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        residual = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + residual)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, conv, bn, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv(inplanes, planes, 1, bias=False)
        self.bn1 = bn(planes)
        self.conv2 = conv(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = bn(planes)
        self.conv3 = conv(planes, planes * 4, 1, bias=False)
        self.bn3 = bn(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        residual = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + residual)


class ResNet(nn.Module):
    """torchvision.models.ResNet (2-D), or with `video=True` Hara et al.'s 3D-ResNets-PyTorch
    ResNet (7x7x7 stem, 3x3x3 max-pool stride 2, shortcut type B)."""

    def __init__(
        self,
        blocks=(3, 4, 6, 3),
        bottleneck=True,
        widths=(64, 128, 256, 512),
        num_classes=1000,
        video=False,
    ):
        super().__init__()
        conv, bn = (nn.Conv3d, nn.BatchNorm3d) if video else (nn.Conv2d, nn.BatchNorm2d)
        if video:
            self.conv1 = nn.Conv3d(3, widths[0], 7, (1, 2, 2), 3, bias=False)
            self.maxpool = nn.MaxPool3d(3, 2, 1)
            self.avgpool = nn.AdaptiveAvgPool3d(1)
        else:
            self.conv1 = nn.Conv2d(3, widths[0], 7, 2, 3, bias=False)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.bn1 = bn(widths[0])
        self.relu = nn.ReLU(inplace=True)
        block_type = Bottleneck if bottleneck else BasicBlock
        inplanes = widths[0]
        for stage, (width, count) in enumerate(zip(widths, blocks)):
            layers = []
            for block in range(count):
                stride = 2 if stage > 0 and block == 0 else 1
                downsample = None
                if stride != 1 or inplanes != width * block_type.expansion:
                    downsample = nn.Sequential(
                        conv(inplanes, width * block_type.expansion, 1, stride, bias=False),
                        bn(width * block_type.expansion),
                    )
                layers.append(block_type(conv, bn, inplanes, width, stride, downsample))
                inplanes = width * block_type.expansion
            setattr(self, f"layer{stage + 1}", nn.Sequential(*layers))
        self.fc = nn.Linear(inplanes, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for stage in range(1, 5):
            x = getattr(self, f"layer{stage}")(x)
        return self.fc(self.avgpool(x).flatten(1))


class I3DBottleneck(nn.Module):
    """pytorch-resnet3d's I3D bottleneck: (t, 1, 1) - (1, 3, 3) strided - 1x1x1 convolutions."""

    def __init__(self, inplanes, planes, stride, downsample, temp_conv):
        super().__init__()
        self.conv1 = nn.Conv3d(
            inplanes, planes, (1 + 2 * temp_conv, 1, 1), 1, (temp_conv, 0, 0), bias=False
        )
        self.bn1 = nn.BatchNorm3d(planes)
        self.conv2 = nn.Conv3d(
            planes, planes, (1, 3, 3), (1, stride, stride), (0, 1, 1), bias=False
        )
        self.bn2 = nn.BatchNorm3d(planes)
        self.conv3 = nn.Conv3d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm3d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        residual = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + residual)


class I3Res50(nn.Module):
    """Tushar-N/pytorch-resnet3d's I3Res50 without non-local blocks, as TeD-SPAD and the penalty
    paper use it (`largei3d`): (5, 7, 7) stem of stride 2, (2, 3, 3) max-pool of stride 2, a
    (2, 1, 1) temporal max-pool after layer1, dropout 0.5 before `fc`."""

    TEMP_CONV = ((1, 1, 1), (1, 0, 1, 0), (1, 0, 1, 0, 1, 0), (0, 1, 0))

    def __init__(
        self, widths=(64, 128, 256, 512), blocks=(3, 4, 6, 3), num_classes=400, stem_width=64
    ):
        super().__init__()
        self.conv1 = nn.Conv3d(3, stem_width, (5, 7, 7), 2, (2, 3, 3), bias=False)
        self.bn1 = nn.BatchNorm3d(stem_width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool1 = nn.MaxPool3d((2, 3, 3), 2)
        self.maxpool2 = nn.MaxPool3d((2, 1, 1), (2, 1, 1))
        inplanes = stem_width
        for stage, (width, count) in enumerate(zip(widths, blocks)):
            layers = []
            for block in range(count):
                stride = 2 if stage > 0 and block == 0 else 1
                downsample = None
                if block == 0 and (stride != 1 or inplanes != width * 4):
                    downsample = nn.Sequential(
                        nn.Conv3d(inplanes, width * 4, 1, (1, stride, stride), bias=False),
                        nn.BatchNorm3d(width * 4),
                    )
                temp_conv = self.TEMP_CONV[stage][block]
                layers.append(I3DBottleneck(inplanes, width, stride, downsample, temp_conv))
                inplanes = width * 4
            setattr(self, f"layer{stage + 1}", nn.Sequential(*layers))
        self.avgpool = nn.AdaptiveAvgPool3d(1)
        self.fc = nn.Linear(inplanes, num_classes)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        x = self.maxpool1(self.relu(self.bn1(self.conv1(x))))
        x = self.maxpool2(self.layer1(x))
        x = self.layer4(self.layer3(self.layer2(x)))
        return self.fc(self.drop(self.avgpool(x)).flatten(1))


class R3DWithBackbone(nn.Module):
    """TeD-SPAD's and the penalty paper's `wrapper_r3d_18` (TeD-SPAD aux_code/model_loaders.py:
    197-208): torchvision's R3D-18 under `backbone.` with an Identity fc, the classifier `fc`."""

    def __init__(self, *args, **kwargs):
        super().__init__()
        self.backbone = VideoResNet(*args, **kwargs)
        self.fc = self.backbone.fc
        self.backbone.fc = nn.Identity()

    def forward(self, x):
        return self.fc(self.backbone(x))


def frozen_bn_state_dict(model: nn.Module) -> dict:
    """`model`'s state dict as after TeD-SPAD's `freeze_bn` (aux_code/models/large_i3d.py:8-37,
    pytorch-resnet3d's FrozenBN): every BatchNorm3d's weight saved as `scale`, without
    `num_batches_tracked`."""
    frozen = {f"{name}." for name, m in model.named_modules() if isinstance(m, nn.BatchNorm3d)}
    tensors = {}
    for key, value in model.state_dict().items():
        module, _, part = key.rpartition(".")
        if f"{module}." in frozen:
            if part == "num_batches_tracked":
                continue
            part = "scale" if part == "weight" else part
        tensors[f"{module}.{part}"] = value
    return tensors


class I3DWithFeatureHead(nn.Module):
    """TeD-SPAD's and the penalty paper's `wrapper_i3d` (f_T as their training scripts save it):
    the I3D under `i3d.` and a feature head under `mlp.` (Linear - BN1d - Linear - BN1d)."""

    def __init__(self, **kwargs):
        super().__init__()
        self.i3d = I3Res50(**kwargs)
        features = self.i3d.fc.in_features
        self.mlp = nn.Module()
        self.mlp.fc1 = nn.Linear(features, 512)
        self.mlp.bn1 = nn.BatchNorm1d(512)
        self.mlp.fc2 = nn.Linear(512, 128, bias=False)
        self.mlp.bn2 = nn.BatchNorm1d(128)

    def forward(self, x):
        return self.i3d(x)


class DoubleConv(nn.Module):
    def __init__(self, in_channels, out_channels, mid_channels=None, bias=False):
        super().__init__()
        mid_channels = mid_channels or out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, 3, padding=1, bias=bias),
            nn.BatchNorm2d(mid_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, 3, padding=1, bias=bias),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, in_channels, out_channels, bias):
        super().__init__()
        self.maxpool_conv = nn.Sequential(
            nn.MaxPool2d(2), DoubleConv(in_channels, out_channels, bias=bias)
        )

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, in_channels, out_channels, bias):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv = DoubleConv(in_channels, out_channels, in_channels // 2, bias=bias)

    def forward(self, x1, x2):
        return self.conv(torch.cat([x2, self.up(x1)], dim=1))


class OutConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 1)

    def forward(self, x):
        return self.conv(x)


class UNet(nn.Module):
    """milesial's Pytorch-UNet with bilinear=True and a sigmoid (SPAct's f_A); `bias=True` is
    the older release, with a bias on every 3x3 convolution."""

    def __init__(self, widths=(64, 128, 256, 512, 512), bias=False):
        super().__init__()
        self.inc = DoubleConv(3, widths[0], bias=bias)
        for level in range(1, len(widths)):
            setattr(self, f"down{level}", Down(widths[level - 1], widths[level], bias))
        channels = widths[-1]
        for i, level in enumerate(range(len(widths) - 2, -1, -1)):
            in_channels = widths[level] + channels
            channels = widths[max(level - 1, 0)]
            setattr(self, f"up{i + 1}", Up(in_channels, channels, bias))
        self.outc = OutConv(channels, 3)
        self.levels = len(widths)

    def forward(self, x):
        skips = [self.inc(x)]
        for level in range(1, self.levels):
            skips.append(getattr(self, f"down{level}")(skips[-1]))
        x = skips[-1]
        for i in range(1, self.levels):
            x = getattr(self, f"up{i}")(x, skips[self.levels - 1 - i])
        return torch.sigmoid(self.outc(x))


class SimCLRHead(nn.Module):
    """The projection head of SPAct's and TeD-SPAD's self-supervised f_B (SPAct
    anonymization_training/model.py:35-51): fc1 - ReLU - fc2 - L2 normalisation."""

    def __init__(self, features=2048, hidden=2048, output=128):
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.relu = nn.ReLU(inplace=True)
        self.fc2 = nn.Linear(hidden, output)

    def forward(self, x):
        return nn.functional.normalize(self.fc2(self.relu(self.fc1(x))), p=2, dim=1)


def simclr_resnet(blocks=(3, 4, 6, 3), widths=(64, 128, 256, 512), hidden=2048, output=128):
    """SPAct's f_B: nn.Sequential(torchvision ResNet-50 with fc = Identity, SimCLRHead), whose
    state dict has keys `0.conv1.weight`, ..., `1.fc1.weight`, `1.fc2.bias`."""
    trunk = ResNet(blocks, True, widths)
    trunk.fc = nn.Identity()
    return nn.Sequential(trunk, SimCLRHead(widths[-1] * 4, hidden, output))


class Conv2dReLU(nn.Sequential):
    """segmentation_models_pytorch's Conv2dReLU with BatchNorm: 3x3 conv (no bias), BN, ReLU."""

    def __init__(self, in_channels, out_channels):
        super().__init__(
            nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )


class UnetPlusPlusBlock(nn.Module):
    """smp's UNet++ DecoderBlock without attention: nearest 2x up, concat skips, two convs."""

    def __init__(self, in_channels, skip_channels, out_channels):
        super().__init__()
        self.conv1 = Conv2dReLU(in_channels + skip_channels, out_channels)
        self.conv2 = Conv2dReLU(out_channels, out_channels)

    def forward(self, x, skip=None):
        x = nn.functional.interpolate(x, scale_factor=2, mode="nearest")
        if skip is not None:
            x = torch.cat([x, skip], dim=1)
        return self.conv2(self.conv1(x))


class UnetPlusPlusDecoder(nn.Module):
    """smp 0.3.3's UnetPlusPlusDecoder (no centre block): blocks `x_{depth}_{layer}`."""

    def __init__(self, encoder_channels, decoder_channels):
        super().__init__()
        encoder_channels = encoder_channels[1:][::-1]
        self.in_channels = [encoder_channels[0], *decoder_channels[:-1]]
        self.skip_channels = [*encoder_channels[1:], 0]
        blocks = {}
        for layer in range(len(self.in_channels) - 1):
            for depth in range(layer + 1):
                if depth == 0:
                    in_ch = self.in_channels[layer]
                    skip_ch = self.skip_channels[layer] * (layer + 1)
                    out_ch = decoder_channels[layer]
                else:
                    out_ch = self.skip_channels[layer]
                    skip_ch = self.skip_channels[layer] * (layer + 1 - depth)
                    in_ch = self.skip_channels[layer - 1]
                blocks[f"x_{depth}_{layer}"] = UnetPlusPlusBlock(in_ch, skip_ch, out_ch)
        last = len(self.in_channels) - 1
        blocks[f"x_0_{last}"] = UnetPlusPlusBlock(self.in_channels[-1], 0, decoder_channels[-1])
        self.blocks = nn.ModuleDict(blocks)
        self.depth = last

    def forward(self, *features):
        features = features[1:][::-1]
        dense = {}
        for layer in range(self.depth):
            for depth in range(self.depth - layer):
                if layer == 0:
                    dense[f"x_{depth}_{depth}"] = self.blocks[f"x_{depth}_{depth}"](
                        features[depth], features[depth + 1]
                    )
                else:
                    level = depth + layer
                    skips = [dense[f"x_{i}_{level}"] for i in range(depth + 1, level + 1)]
                    skips = torch.cat([*skips, features[level + 1]], dim=1)
                    dense[f"x_{depth}_{level}"] = self.blocks[f"x_{depth}_{level}"](
                        dense[f"x_{depth}_{level - 1}"], skips
                    )
        return self.blocks[f"x_0_{self.depth}"](dense[f"x_0_{self.depth - 1}"])


class UnetPlusPlus(nn.Module):
    """TeD-SPAD's f_A (aux_code/model_loaders.py:19-30): smp 0.3.3's UnetPlusPlus on a
    torchvision ResNet encoder of `encoder_depth` (its fc and avgpool deleted, the stages past
    the depth kept in the state dict but unused, as smp's), segmentation head Conv2d 3x3 to 3
    channels, and smp's `activation` after it (TeD-SPAD's and the penalty authors': None)."""

    def __init__(
        self,
        encoder_depth=4,
        widths=(64, 128, 256, 512),
        blocks=(2, 2, 2, 2),
        decoder_channels=(256, 128, 64, 32),
        activation=None,
    ):
        super().__init__()
        self.activation = {None: nn.Identity(), "sigmoid": nn.Sigmoid()}[activation]
        self.encoder = ResNet(blocks, False, widths)
        del self.encoder.fc, self.encoder.avgpool
        encoder_channels = (3, widths[0], *widths[: encoder_depth - 1])
        self.decoder = UnetPlusPlusDecoder(encoder_channels, decoder_channels)
        self.segmentation_head = nn.Sequential(nn.Conv2d(decoder_channels[-1], 3, 3, padding=1))
        self.encoder_depth = encoder_depth

    def forward(self, x):
        e = self.encoder
        features = [x, e.relu(e.bn1(e.conv1(x)))]
        features.append(e.layer1(e.maxpool(features[-1])))
        for stage in range(2, self.encoder_depth):
            features.append(getattr(e, f"layer{stage}")(features[-1]))
        return self.activation(self.segmentation_head(self.decoder(*features)))


def randomize(model: nn.Module, seed: int = 0) -> nn.Module:
    """Random weights everywhere, BatchNorm running statistics and affine parameters included
    (so a swapped mean / variance or a wrong epsilon shows), and eval mode."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name.endswith("num_batches_tracked"):
                continue
            if name.endswith("running_var"):
                tensor.copy_(torch.rand(tensor.shape, generator=generator) + 0.5)
            elif name.endswith(("running_mean", "bias")):
                tensor.copy_(torch.randn(tensor.shape, generator=generator) * 0.1)
            elif tensor.ndim == 1:  # BatchNorm weight
                tensor.copy_(torch.rand(tensor.shape, generator=generator) + 0.5)
            else:
                fan_in = tensor[0].numel()
                tensor.copy_(torch.randn(tensor.shape, generator=generator) / fan_in**0.5)
    return model.eval()
