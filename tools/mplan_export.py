#!/usr/bin/python3
"""mplan's PyTorch exporter: a torch.nn.Module to mplan's model YAML, for people
without ONNX (docs/import.md). It traces the module with torch.fx, runs each
traced op on an example batch on the way (so Python code that reads shapes,
as torchvision's ViT does, traces too), maps each op to an mplan layer named
after the module it comes from, appends the loss (softmax cross-entropy on the
logits) and the optimizer, and can save the module's weights as the generated
program's --load folder (one .npy per tensor, docs/generated-program.md), so a
pretrained model can be fine-tuned under a budget.

    tools/mplan_export.py torchvision:resnet50 --input 3,224,224 --batch 32 \\
        -o resnet50.yaml --weights resnet50-weights
    tools/mplan_export.py mypackage.models:make_net --input 3,32,32 --batch 64 -o net.yaml

MODEL is torchvision:NAME (torchvision.models.NAME()), MODULE:FUNCTION (a
function of an importable module, or of a .py file, returning the module), and
--state-dict FILE loads weights saved with torch.save(model.state_dict()).

The weights come back the same way: with --from-checkpoint DIR the module is
exported again to map the names, DIR's tensors (a checkpoint of the generated
program) are loaded into it, and its state dict is written with torch.save to
the file -o names:

    tools/mplan_export.py torchvision:resnet50 --input 3,224,224 --batch 32 \\
        --from-checkpoint run/ckpt -o resnet50-trained.pt
From Python: export(module, input_shape, batch) returns the YAML text, the
weights and the names of PyTorch's tensors in mplan's.

Reshapes, permutes and transposes follow the tensor through a view of the
layer output it comes from (the same algebra as the ONNX importer,
frontend/onnx/view.h): where a layer needs another layout the view becomes a
layer (reshape, channel_shuffle, patch_embed) or the export stops, naming the
op. Every op that cannot be exported is listed, then the export fails.
"""
import argparse
import importlib
import importlib.util
import json
import math
import operator
import os
import sys

import numpy as np
import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F
from torch.fx._symbolic_trace import _orig_module_call


class ExportError(Exception):
    pass


class _FromEarlier(ExportError):
    """An op whose input could not be exported: the earlier op is the one reported."""


# ---- integers of shape arithmetic: coef, or coef times the batch N -----------------------------------


class Dim:
    def __init__(self, coef, batch=False):
        self.coef, self.batch = int(coef), bool(batch)

    def __eq__(self, other):
        other = as_dim(other)
        return other is not None and self.coef == other.coef and self.batch == other.batch

    def __hash__(self):
        return hash((self.coef, self.batch))

    def __repr__(self):
        return ("%d*N" % self.coef if self.coef != 1 else "N") if self.batch else str(self.coef)


def as_dim(v):
    if isinstance(v, Dim):
        return v
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return Dim(int(v))
    return None


def dim_mul(a, b):
    a, b = as_dim(a), as_dim(b)
    if a is None or b is None or (a.batch and b.batch):
        return None
    return Dim(a.coef * b.coef, a.batch or b.batch)


def dim_div(a, b):
    a, b = as_dim(a), as_dim(b)
    if a is None or b is None or b.coef == 0 or (b.batch and not a.batch) or a.coef % b.coef:
        return None
    return Dim(a.coef // b.coef, a.batch and not b.batch)


def plain_int(v):
    return v.coef if isinstance(v, Dim) and not v.batch else v


# ---- views (frontend/onnx/view.h) -------------------------------------------------------------------


class View:
    """A tensor of the model as a reshape/transpose of a layer's output (its
    base, per-sample shape S): atoms per base axis, ONNX-style axes as lists of atoms."""

    def __init__(self, base_dims):
        self.atoms = [(0, 1)]  # (base axis, size); axis 0 is the batch
        self.axis_atoms = [[0]]
        self.groups = [[0]]
        for k, d in enumerate(base_dims):
            ids = []
            if d != 1:
                self.atoms.append((k + 1, d))
                ids = [len(self.atoms) - 1]
            self.axis_atoms.append(ids)
            self.groups.append(list(ids))

    def copy(self):
        v = View([])
        v.atoms = list(self.atoms)
        v.axis_atoms = [list(a) for a in self.axis_atoms]
        v.groups = [list(g) for g in self.groups]
        return v

    def dims(self):
        out = []
        for g in self.groups:
            d = Dim(1)
            for i in g:
                d = Dim(d.coef, True) if self.atoms[i][0] == 0 else Dim(d.coef * self.atoms[i][1], d.batch)
            out.append(d)
        return out

    def rank(self):
        return len(self.groups)

    def transpose(self, perm):
        if sorted(perm) != list(range(len(self.groups))):
            return False
        self.groups = [self.groups[p] for p in perm]
        return True

    def _split(self, i, outer):
        axis, size = self.atoms[i]
        self.atoms[i] = (axis, outer)
        self.atoms.append((axis, size // outer))
        inner = len(self.atoms) - 1
        for lst in [self.axis_atoms[axis]] + self.groups:
            if i in lst:
                lst.insert(lst.index(i) + 1, inner)
        return inner

    def reshape(self, target):
        before = self.copy()
        seq = [i for g in self.groups for i in g]
        out, at = [], 0
        for t in target:
            t = as_dim(t)
            if t is None or t.coef < 1:
                self.__dict__.update(before.__dict__)
                return False
            group, have = [], Dim(1)
            while not have == t:
                need = dim_div(t, have)
                if need is None or at >= len(seq):
                    self.__dict__.update(before.__dict__)
                    return False
                i = seq[at]
                axis, size = self.atoms[i]
                if axis == 0:
                    if not need.batch:
                        self.__dict__.update(before.__dict__)
                        return False
                    have = Dim(have.coef, True)
                elif need.coef % size == 0 and need.coef >= size:
                    have = Dim(have.coef * size, have.batch)
                elif size % need.coef == 0 and need.coef > 1:
                    seq.insert(at + 1, self._split(i, need.coef))
                    have = Dim(have.coef * need.coef, have.batch)
                else:
                    self.__dict__.update(before.__dict__)
                    return False
                group.append(i)
                at += 1
            out.append(group)
        if at != len(seq):
            self.__dict__.update(before.__dict__)
            return False
        self.groups = out
        return True

    def unsqueeze(self, axis):
        if not 0 <= axis <= len(self.groups):
            return False
        self.groups.insert(axis, [])
        return True

    def squeeze(self, axis):
        if not 0 <= axis < len(self.groups) or self.groups[axis]:
            return False
        del self.groups[axis]
        return True

    def is_plain(self):
        return self.groups == self.axis_atoms

    def is_reshaped_plain(self):
        if not self.groups or self.groups[0] != [0]:
            return False
        return [i for g in self.groups[1:] for i in g] == [i for a in self.axis_atoms[1:] for i in a]

    def whole_base_axis(self, axis):
        g = self.groups[axis]
        if not g:
            return 0
        for k in range(1, len(self.axis_atoms)):
            if self.axis_atoms[k] == g:
                return k
        return 0

    def batch_axis(self):
        for k, g in enumerate(self.groups):
            if 0 in g:
                return k
        return -1

    def resize_base_axis(self, axis, size):
        atoms = self.axis_atoms[axis]
        if not atoms:
            return size == 1
        for g in self.groups:
            if atoms[0] not in g:
                continue
            at = g.index(atoms[0])
            if g[at:at + len(atoms)] != atoms:
                return False
            del g[at:at + len(atoms)]
            if size == 1:
                self.axis_atoms[axis] = []
            else:
                self.atoms[atoms[0]] = (axis, size)
                g.insert(at, atoms[0])
                self.axis_atoms[axis] = [atoms[0]]
            return True
        return False

    def arrangement(self):
        name = {}
        for k, lst in enumerate(self.axis_atoms):
            for p, i in enumerate(lst):
                name[i] = (k, p, self.atoms[i][1])
        return [[name[i] for i in g] for g in self.groups]

    def __repr__(self):
        return "(%s)" % ", ".join(map(repr, self.dims()))


# ---- tracing: torch.fx, each op also run on an example batch ----------------------------------------


class _ConcreteProxy(fx.Proxy):
    def __len__(self):
        return len(self.node.meta["value"])

    def __iter__(self):  # by the value's length (fx's own reads bytecode, which Python 3.11 changed)
        return iter([self[i] for i in range(len(self.node.meta["value"]))])


class ConcreteTracer(fx.Tracer):
    """fx's tracer, with every recorded op also run on real tensors: the
    values give the shapes, and Python code that iterates over a shape or
    branches on a value (x.shape unpacking, asserts) traces as it ran."""

    def __init__(self, example):
        super().__init__()
        self.example = example
        self.running = 0  # > 0 while an op runs on real tensors: nothing is recorded then

    def proxy(self, node):
        return _ConcreteProxy(node, self)

    def call_module(self, m, forward, args, kwargs):
        if self.running:
            return forward(*args, **kwargs)
        return super().call_module(m, forward, args, kwargs)

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        if self.running:
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, proxy_factory_fn=None):
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)

        def concrete(a):
            if isinstance(a, fx.Proxy):
                return a.node.meta["value"]
            if isinstance(a, (tuple, list)):
                return type(a)(concrete(x) for x in a)
            if isinstance(a, dict):
                return {k: concrete(v) for k, v in a.items()}
            if isinstance(a, slice):
                return slice(concrete(a.start), concrete(a.stop), concrete(a.step))
            return a

        cargs, ckwargs = concrete(args), concrete(kwargs)
        self.running += 1
        try:
            with torch.no_grad():
                if kind == "placeholder":
                    value = self.example
                elif kind == "get_attr":
                    value = self.root
                    for part in target.split("."):
                        value = getattr(value, part)
                elif kind == "call_module":
                    value = _orig_module_call(self.root.get_submodule(target), *cargs, **ckwargs)
                elif kind == "call_function":
                    value = target(*cargs, **ckwargs)
                elif kind == "call_method":
                    value = getattr(cargs[0], target)(*cargs[1:], **ckwargs)
                else:
                    value = None
        finally:
            self.running -= 1
        proxy.node.meta["value"] = value
        return proxy

    def iter(self, obj):
        return iter([obj[i] for i in range(len(obj.node.meta["value"]))])

    def to_bool(self, obj):
        return bool(obj.node.meta["value"])

    def keys(self, obj):
        return obj.node.meta["value"].keys()


def trace(module, example):
    tracer = ConcreteTracer(example)
    graph = tracer.trace(module)
    return graph


# ---- the export ---------------------------------------------------------------------------------------------


class Tensor:
    def __init__(self, base, view):
        self.base, self.view = base, view


class Param:
    def __init__(self, name, tensor):
        self.name, self.tensor = name, tensor


class Expanded:  # a parameter expanded over the batch (a class token)
    def __init__(self, param):
        self.param = param


def _layer_name(text):
    out = "".join(c if c.isalnum() else "_" for c in text)
    while "__" in out:
        out = out.replace("__", "_")
    out = out.strip("_")
    if not out or not out[0].isalpha():
        out = "n" + out
    return out


def _pair(v):
    v = v if isinstance(v, (tuple, list)) else (v, v)
    return v[0] if v[0] == v[1] else "[%d, %d]" % (v[0], v[1])


class Exporter:
    def __init__(self, module, input_shape, batch):
        self.module = module
        self.input_shape = list(input_shape)
        self.batch = batch
        self.layers = []  # dicts: name, op, inputs, fields, note, tensors [(suffix, torch name, array)]
        self.bases = []  # per base: (layer index or -1, per-sample dims)
        self.names = {"input"}
        self.problems = []
        self.values = {}
        self.moved = {}  # (base, arrangement) -> the tensor a rearrangement became

    # -- layers and bases -------------------------------------------------------------------------------
    def new_base(self, layer, dims):
        self.bases.append((layer, list(dims)))
        return len(self.bases) - 1

    def plain_tensor(self, layer, dims):
        return Tensor(self.new_base(layer, dims), View(dims))

    def like(self, layer, t):
        return Tensor(self.new_base(layer, self.bases[t.base][1]), t.view.copy())

    def base_dims(self, t):
        return self.bases[t.base][1]

    def layer_of(self, t):
        return self.bases[t.base][0]

    def emit(self, name, op, inputs, fields=(), note="", tensors=()):
        base_name = _layer_name(name)
        unique, k = base_name, 2
        while unique in self.names:
            unique, k = "%s_%d" % (base_name, k), k + 1
        self.names.add(unique)
        ins = ["input" if self.bases[t.base][0] < 0 else self.layers[self.bases[t.base][0]]["name"] for t in inputs]
        self.layers.append(dict(name=unique, op=op, inputs=ins, fields=list(fields), note=note, tensors=list(tensors)))
        return len(self.layers) - 1

    # -- layouts ----------------------------------------------------------------------------------------
    def plain(self, t, node, rank=None):
        v = t.view
        if rank is not None and v.rank() != rank:
            raise ExportError("needs a tensor of rank %d, got %r" % (rank, v))
        if v.is_plain():
            return t
        key = (t.base, repr(v.arrangement()))
        if key not in self.moved:  # one layer per rearrangement, whoever asks (both halves of a chunk)
            self.moved[key] = self._move(t, node)
        return self.moved[key]

    def _move(self, t, node):
        v = t.view
        if v.batch_axis() != 0:
            raise ExportError("its input %r has the batch elsewhere than in front" % (v,))
        dims = v.dims()
        per_sample = [d.coef for d in dims[1:]]
        base = self.base_dims(t)
        if v.is_reshaped_plain():
            layer = self.emit(node.name + "_reshape", "reshape", [t], [("shape", "[%s]" % ", ".join(map(str, per_sample)))],
                              "the view of the next op's input")
            return self.plain_tensor(layer, per_sample)
        if v.rank() == len(base) + 1 and len(v.axis_atoms[1]) == 2:
            a, b = v.axis_atoms[1]
            if v.groups[1] == [b, a] and all(v.groups[k] == v.axis_atoms[k] for k in range(2, v.rank())):
                layer = self.emit(node.name + "_shuffle", "channel_shuffle", [t], [("groups", v.atoms[a][1])],
                                  "the view, transpose and view of a channel shuffle")
                return self.plain_tensor(layer, per_sample)
        if len(base) == 3 and v.rank() == 3:  # ViT: a conv with kernel = stride seen as (N, h*w, D)
            layer = self.layer_of(t)
            hw = v.axis_atoms[2] + v.axis_atoms[3]
            conv = self.layers[layer] if layer >= 0 else None
            if conv and conv["op"] == "conv" and v.groups[1] == hw and v.groups[2] == v.axis_atoms[1]:
                f = dict(conv["fields"])
                used = any(conv["name"] in l["inputs"] for l in self.layers)
                if not used and f.get("kernel") == f.get("stride") and "pad" not in f and "dilation" not in f \
                        and "groups" not in f and not isinstance(f.get("kernel"), str):
                    conv["op"] = "patch_embed"
                    conv["fields"] = [("out", f["out"]), ("patch", f["kernel"])] + \
                        [(k, x) for k, x in conv["fields"] if k == "bias"]
                    conv["note"] = "a conv with kernel = stride, its output seen as a sequence of patches"
                    return self.plain_tensor(layer, [base[1] * base[2], base[0]])
        raise ExportError("its input %r is a rearrangement of a layer's output that mplan has no layer for" % (v,))

    # -- values ---------------------------------------------------------------------------------------------
    def value(self, a):
        if isinstance(a, fx.Node):
            if a.name not in self.values:
                raise _FromEarlier(a.name)
            return self.values[a.name]
        if isinstance(a, (tuple, list)):
            return type(a)(self.value(x) for x in a)
        if isinstance(a, slice):
            return slice(self.value(a.start), self.value(a.stop), self.value(a.step))
        if isinstance(a, dict):
            return {k: self.value(x) for k, x in a.items()}
        return a

    def tensor(self, a):
        v = a if isinstance(a, Tensor) else self.value(a)
        if not isinstance(v, Tensor):
            raise ExportError("expects a tensor computed from the input, got %s" % type(v).__name__)
        return v

    # -- ops --------------------------------------------------------------------------------------------------
    def elementwise(self, node, x, op, fields=(), note=""):
        t = self.tensor(x)
        return self.like(self.emit(node.name, op, [t], fields, note), t)

    def conv(self, node, name, m, x):
        if m.padding_mode != "zeros" or isinstance(m.padding, str):
            raise ExportError("a conv with padding %r; mplan pads with zeros, by number" % (m.padding,))
        t = self.plain(self.tensor(x), node, 4)
        c, h, w = self.base_dims(t)
        fields = [("out", m.out_channels), ("kernel", _pair(m.kernel_size))]
        if tuple(m.stride) != (1, 1):
            fields.append(("stride", _pair(m.stride)))
        if tuple(m.padding) != (0, 0):
            fields.append(("pad", _pair(m.padding)))
        if tuple(m.dilation) != (1, 1):
            fields.append(("dilation", _pair(m.dilation)))
        if m.groups != 1:
            fields.append(("groups", m.groups))
        if m.bias is None:
            fields.append(("bias", "false"))
        tensors = [("weight", name + ".weight", m.weight)] + ([("bias", name + ".bias", m.bias)] if m.bias is not None else [])
        layer = self.emit(name, "conv", [t], fields, tensors=tensors)
        out = node.meta["value"].shape
        return self.plain_tensor(layer, list(out[1:]))

    def linear(self, node, name, x, weight, bias, weight_name, bias_name):
        t = self.tensor(x)
        last = t.view.rank() - 1
        axis = t.view.whole_base_axis(last)
        dims = self.base_dims(t)
        one_pixel = len(dims) == 3 and dims[1:] == [1, 1]  # pooled feature maps, flattened: reshape, linear
        if axis == 0 or (one_pixel and axis == 1 and not t.view.is_plain() and t.view.is_reshaped_plain()):
            t = self.plain(t, node)
            last = t.view.rank() - 1
            axis = t.view.whole_base_axis(last)
        dims = self.base_dims(t)
        out_f, in_f = weight.shape
        if axis == 0 or dims[axis - 1] != in_f:
            raise ExportError("a linear layer (%d -> %d) on %r" % (in_f, out_f, t.view))
        fields = [("out", out_f)]
        op, w, note = "linear", weight, ""
        if len(dims) == 3 and axis == 1:  # over the channels of feature maps (channels last)
            op, w, note = "conv", weight.reshape(out_f, in_f, 1, 1), "a linear layer over the channels of feature maps"
            fields.append(("kernel", 1))
        elif axis != len(dims) or len(dims) > 2:
            raise ExportError("a linear layer over axis %d of %r" % (axis, t.view))
        if bias is None:
            fields.append(("bias", "false"))
        tensors = [("weight", weight_name, w)] + ([("bias", bias_name, bias)] if bias is not None else [])
        layer = self.emit(name, op, [t], fields, note, tensors)
        out_dims = list(dims)
        out_dims[axis - 1] = out_f
        view = t.view.copy()
        view.resize_base_axis(axis, out_f)
        return Tensor(self.new_base(layer, out_dims), view)

    def layernorm(self, node, name, x, shape, weight, bias, eps, weight_name, bias_name):
        t = self.tensor(x)
        shape = list(shape) if isinstance(shape, (tuple, list)) else [shape]
        last = t.view.rank() - 1
        axis = t.view.whole_base_axis(last)
        dims = self.base_dims(t)
        if len(shape) != 1 or not ((len(dims) == 3 and axis == 1) or (len(dims) <= 2 and axis == len(dims))):
            raise ExportError("a layer norm over %r of %r: mplan normalises the channels of feature maps or the "
                              "features of a sequence" % (shape, t.view))
        if weight is None or bias is None:
            raise ExportError("a layer norm without its scale and shift")
        fields = [] if abs(eps - 1e-5) < 1e-12 else [("eps", "%g" % eps)]
        layer = self.emit(name, "layernorm", [t], fields,
                          tensors=[("weight", weight_name, weight), ("bias", bias_name, bias)])
        return self.like(layer, t)

    def pool(self, node, name, x, max_pool, kernel, stride, padding, ceil_mode, count_include_pad=True):
        t = self.plain(self.tensor(x), node, 4)
        kernel = kernel if isinstance(kernel, (tuple, list)) else (kernel, kernel)
        stride = kernel if stride is None or stride == [] else stride
        stride = stride if isinstance(stride, (tuple, list)) else (stride, stride)
        padding = padding if isinstance(padding, (tuple, list)) else (padding, padding)
        if not max_pool and not count_include_pad and tuple(padding) != (0, 0):
            raise ExportError("an average pooling with count_include_pad=False; mplan counts the padding")
        fields = [("mode", "max" if max_pool else "avg"), ("kernel", _pair(kernel))]
        if tuple(stride) != tuple(kernel):
            fields.append(("stride", _pair(stride)))
        if tuple(padding) != (0, 0):
            fields.append(("pad", _pair(padding)))
        if ceil_mode:
            fields.append(("ceil_mode", "true"))
        layer = self.emit(name, "pool", [t], fields)
        return self.plain_tensor(layer, list(node.meta["value"].shape[1:]))

    def adaptive_pool(self, node, name, x, size):
        t = self.plain(self.tensor(x), node, 4)
        size = size if isinstance(size, (tuple, list)) else (size, size)
        c, h, w = self.base_dims(t)
        oh, ow = (h if size[0] is None else size[0]), (w if size[1] is None else size[1])
        if (oh, ow) == (1, 1):
            return self.plain_tensor(self.emit(name, "global_avgpool", [t]), [c, 1, 1])
        return self.plain_tensor(self.emit(name, "adaptive_avgpool", [t], [("out", _pair((oh, ow)))]), [c, oh, ow])

    def add(self, node, a, b):
        va, vb = self.value(a), self.value(b)
        for x, p in ((va, vb), (vb, va)):
            if isinstance(x, Tensor) and isinstance(p, Param):
                t = self.plain(x, node)
                if list(p.tensor.shape) != [1] + self.base_dims(t):
                    raise ExportError("adds a parameter of shape %s to %r" % (list(p.tensor.shape), t.view))
                layer = self.emit(node.name, "pos_embed", [t], note="a parameter added to every sample",
                                  tensors=[("weight", p.name, p.tensor)])
                return self.like(layer, t)
        if not (isinstance(va, Tensor) and isinstance(vb, Tensor)):
            raise ExportError("adds %s and %s; mplan adds tensors (or a learned tensor to each sample)" %
                              (type(va).__name__, type(vb).__name__))
        if not (va.view.arrangement() == vb.view.arrangement() and self.base_dims(va) == self.base_dims(vb)):
            va, vb = self.plain(va, node), self.plain(vb, node)
            if self.base_dims(va) != self.base_dims(vb):
                raise ExportError("adds tensors of different shapes")
        return self.like(self.emit(node.name, "add", [va, vb]), va)

    def mul(self, node, a, b):
        va, vb = self.value(a), self.value(b)
        for x, p in ((va, vb), (vb, va)):
            if isinstance(x, Tensor) and isinstance(p, Param):
                t = self.plain(x, node, 4)
                c = self.base_dims(t)[0]
                if list(p.tensor.shape) not in ([c, 1, 1], [1, c, 1, 1], [c]):
                    raise ExportError("multiplies by a parameter of shape %s" % list(p.tensor.shape))
                layer = self.emit(node.name, "channel_scale", [t], note="a learned factor per channel",
                                  tensors=[("weight", p.name, p.tensor.reshape(c, 1, 1))])
                return self.like(layer, t)
        if not (isinstance(va, Tensor) and isinstance(vb, Tensor)):
            raise ExportError("multiplies %s and %s; mplan multiplies tensors" % (type(va).__name__, type(vb).__name__))
        if va.view.arrangement() == vb.view.arrangement() and self.base_dims(va) == self.base_dims(vb):
            return self.like(self.emit(node.name, "mul", [va, vb]), va)
        va, vb = self.plain(va, node), self.plain(vb, node)
        da, db = self.base_dims(va), self.base_dims(vb)
        if da == db or (len(da) == len(db) and da[0] == db[0] and (math.prod(db) == db[0] or math.prod(da) == da[0])):
            full = va if math.prod(da) >= math.prod(db) else vb
            return self.like(self.emit(node.name, "mul", [va, vb]), full)
        raise ExportError("multiplies tensors of shapes %s and %s" % (da, db))

    def cat(self, node, tensors, dim):
        vals = [self.value(t) for t in tensors]
        if len(vals) == 1:
            return vals[0]
        if len(vals) == 2 and isinstance(vals[0], Expanded):
            x = self.plain(self.tensor(tensors[1]), node, 3)
            t_, d = self.base_dims(x)
            p = vals[0].param
            if dim not in (1, -2) or list(p.tensor.shape) != [1, 1, d]:
                raise ExportError("concatenates a broadcast parameter other than a class token (1, 1, D)")
            layer = self.emit(node.name, "class_token", [x], note="the parameter's expansion and the concat",
                              tensors=[("weight", p.name, p.tensor)])
            return self.plain_tensor(layer, [t_ + 1, d])
        ts = []
        for arg in tensors:
            t = self.plain(self.tensor(arg), node)
            inner = self.layer_of(t)
            # A concat of a concat used only here (Inception's nested branches): one layer.
            if inner >= 0 and self.layers[inner]["op"] == "concat" and isinstance(arg, fx.Node) and \
                    len(arg.users) == 1 and dim in (1, -3) and self.layers[inner].get("parts"):
                ts.extend(self.layers[inner]["parts"])
            else:
                ts.append(t)
        rank = ts[0].view.rank()
        if (dim if dim >= 0 else dim + rank) != 1:
            raise ExportError("concatenates along another axis than the first after the batch")
        dims = list(self.base_dims(ts[0]))
        dims[0] = sum(self.base_dims(t)[0] for t in ts)
        layer = self.emit(node.name, "concat", ts)
        self.layers[layer]["parts"] = ts
        return self.plain_tensor(layer, dims)

    def matmul(self, node, a, b):
        """a @ b of two tensors computed from the input: batched, per sample (mplan's
        matmul); b may be the transpose of the last two axes of a layer's output."""
        va, vb = self.value(a), self.value(b)
        if isinstance(vb, Param):
            return self.linear(node, node.name, a, vb.tensor.t(), None, vb.name, None)
        ta = self.plain(self.tensor(a), node)
        tb = self.tensor(b)
        transpose_b = False
        if not tb.view.is_plain():
            rank = tb.view.rank()
            swapped = tb.view.copy()
            perm = list(range(rank))
            perm[-1], perm[-2] = perm[-2], perm[-1]
            if rank >= 3 and swapped.transpose(perm) and swapped.is_plain():
                transpose_b = True
            else:
                tb = self.plain(tb, node)
        da, db = self.base_dims(ta), self.base_dims(tb)
        if len(da) != len(db) or len(da) < 2 or da[:-2] != db[:-2] or da[-1] != (db[-1] if transpose_b else db[-2]):
            raise ExportError("a matrix product of %s and %s%s" % (da, db, " (transposed)" if transpose_b else ""))
        fields = [("transpose_b", "true")] if transpose_b else []
        layer = self.emit(node.name, "matmul", [ta, tb], fields)
        return self.plain_tensor(layer, da[:-1] + [db[-2] if transpose_b else db[-1]])

    def slice_axis(self, node, t, axis, begin, end, name):
        v = t.view
        if v.whole_base_axis(axis) == 0 or len(v.groups[axis]) != 1:
            t = self.plain(t, node)
            v = t.view
        base_axis = v.whole_base_axis(axis)
        if base_axis == 0 or len(v.groups[axis]) != 1:
            raise ExportError("slices axis %d of %r, which is not one axis of a layer's output" % (axis, v))
        dims = list(self.base_dims(t))
        size = dims[base_axis - 1]
        if (begin, end) == (0, size):
            return t
        layer = self.emit(name, "slice", [t], [("axis", base_axis - 1), ("begin", begin), ("end", end)])
        dims[base_axis - 1] = end - begin
        view = v.copy()
        view.resize_base_axis(base_axis, end - begin)
        return Tensor(self.new_base(layer, dims), view)

    def getitem(self, node, x, index):
        v = self.value(x)
        if not isinstance(v, Tensor):
            return v[index]
        index = index if isinstance(index, tuple) else (index,)
        out, axis, squeeze = v, 0, []
        for item in index:
            dims = out.view.dims()
            if isinstance(item, slice) and item == slice(None, None, None):
                axis += 1
                continue
            if axis == 0 or dims[axis].batch:
                raise ExportError("indexes the batch")
            size = dims[axis].coef
            if isinstance(item, int):
                i = item + size if item < 0 else item
                out = self.slice_axis(node, out, axis, i, i + 1, node.name)
                squeeze.append(axis)
            elif isinstance(item, slice) and item.step in (None, 1):
                begin, end, _ = item.indices(size)
                out = self.slice_axis(node, out, axis, begin, end, node.name)
            else:
                raise ExportError("an index mplan cannot follow: %r" % (item,))
            axis += 1
        view = out.view.copy()
        for a in reversed(squeeze):
            view.squeeze(a)
        return Tensor(out.base, view)

    def view_op(self, node, x, kind, args):
        t = self.tensor(x)
        view = t.view.copy()
        rank = view.rank()
        ok = True
        if kind == "reshape":
            target = list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)) else list(args)
            dims = view.dims()
            total = Dim(1)
            for d in dims:
                total = dim_mul(total, d)
            known = Dim(1)
            free = None
            for k, d in enumerate(target):
                if as_dim(d) == Dim(-1):
                    free = k
                else:
                    known = dim_mul(known, d)
            if free is not None:
                target[free] = dim_div(total, known)
            ok = None not in target and known is not None and view.reshape(target)
        elif kind == "permute":
            perm = list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else list(args)
            ok = view.transpose([p % rank for p in perm])
        elif kind == "transpose":
            a, b = args[0] % rank, args[1] % rank
            perm = list(range(rank))
            perm[a], perm[b] = perm[b], perm[a]
            ok = view.transpose(perm)
        elif kind == "flatten":
            start = (args[0] if args else 0) % rank
            end = (args[1] if len(args) > 1 else -1) % rank
            dims = view.dims()
            merged = Dim(1)
            for d in dims[start:end + 1]:
                merged = dim_mul(merged, d)
            ok = merged is not None and view.reshape(dims[:start] + [merged] + dims[end + 1:])
        elif kind == "unsqueeze":
            ok = view.unsqueeze(args[0] % (rank + 1))
        elif kind == "squeeze":
            dims = view.dims()
            axes = [args[0] % rank] if args else [k for k, d in enumerate(dims) if d == Dim(1)]
            for a in sorted(axes, reverse=True):
                if dims[a] == Dim(1):
                    ok = ok and view.squeeze(a)
        if not ok:
            raise ExportError("a %s of %r that mplan cannot follow (it would split the batch or mix it with other "
                              "axes)" % (kind, t.view))
        return Tensor(t.base, view)

    def run_node(self, node, modules):
        op, target = node.op, node.target
        args = node.args
        kwargs = node.kwargs
        if op == "placeholder":
            return self.plain_tensor(-1, self.input_shape)
        if op == "get_attr":
            value = self.module
            for part in target.split("."):
                value = getattr(value, part)
            return Param(target, value) if isinstance(value, torch.Tensor) else value
        if op == "output":
            return self.value(args[0])
        if op == "call_module":
            m = modules[target]
            return self.call_module(node, target, m, args, kwargs)
        if op == "call_function":
            return self.call_function(node, target, args, kwargs)
        if op == "call_method":
            return self.call_method(node, target, args, kwargs)
        raise ExportError("an fx node of kind %s" % op)

    def call_module(self, node, name, m, args, kwargs):
        x = args[0] if args else kwargs.get("input")
        if isinstance(m, nn.Conv2d):
            return self.conv(node, name, m, x)
        if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)):
            t = self.tensor(x)
            t = self.plain(t, node, 4 if isinstance(m, nn.BatchNorm2d) else 2)
            if not m.affine or not m.track_running_stats:
                raise ExportError("a batch norm without affine parameters or running statistics")
            fields = []
            if abs(m.eps - 1e-5) > 1e-12:
                fields.append(("eps", "%g" % m.eps))
            if m.momentum is None or abs(m.momentum - 0.1) > 1e-12:
                if m.momentum is None:
                    raise ExportError("a batch norm with a cumulative average (momentum=None)")
                fields.append(("momentum", "%g" % m.momentum))
            tensors = [(s, name + "." + s, getattr(m, s)) for s in ("weight", "bias", "running_mean", "running_var")]
            return self.like(self.emit(name, "batchnorm", [t], fields, tensors=tensors), t)
        simple = {nn.ReLU: "relu", nn.Hardswish: "hardswish", nn.Hardsigmoid: "hardsigmoid", nn.SiLU: "silu",
                  nn.Sigmoid: "sigmoid"}
        for cls, op in simple.items():
            if type(m) is cls:
                return self.elementwise(node, x, op)
        if isinstance(m, nn.GELU):
            return self.elementwise(node, x, "gelu", [("approximate", "tanh")] if m.approximate == "tanh" else [])
        if isinstance(m, (nn.ReLU6, nn.Hardtanh)):
            return self.elementwise(node, x, "clip", [("min", "%g" % m.min_val), ("max", "%g" % m.max_val)])
        if isinstance(m, nn.Softmax):
            t = self.tensor(x)
            rank = t.view.rank()
            if m.dim is None or m.dim % rank != rank - 1 or t.view.whole_base_axis(rank - 1) != len(self.base_dims(t)):
                raise ExportError("a softmax over another axis than the last")
            return self.elementwise(node, x, "softmax")
        if isinstance(m, nn.Linear):
            return self.linear(node, name, x, m.weight, m.bias, name + ".weight", name + ".bias")
        if isinstance(m, nn.LayerNorm):
            return self.layernorm(node, name, x, m.normalized_shape, m.weight, m.bias, m.eps, name + ".weight",
                                  name + ".bias")
        if isinstance(m, nn.MaxPool2d):
            if m.dilation not in (1, (1, 1)) or m.return_indices:
                raise ExportError("a dilated max pooling, or one returning its indices")
            return self.pool(node, name, x, True, m.kernel_size, m.stride, m.padding, m.ceil_mode)
        if isinstance(m, nn.AvgPool2d):
            if m.divisor_override:
                raise ExportError("an average pooling with divisor_override")
            return self.pool(node, name, x, False, m.kernel_size, m.stride, m.padding, m.ceil_mode,
                             m.count_include_pad)
        if isinstance(m, nn.AdaptiveAvgPool2d):
            return self.adaptive_pool(node, name, x, m.output_size)
        if isinstance(m, (nn.Dropout, nn.Dropout2d)):
            if m.p == 0:
                return self.value(x)
            if isinstance(m, nn.Dropout2d):
                raise ExportError("channel dropout (Dropout2d)")
            return self.elementwise(node, x, "dropout", [("p", "%g" % m.p)])
        if isinstance(m, nn.Identity):
            return self.value(x)
        if isinstance(m, nn.Flatten):
            return self.view_op(node, x, "flatten", (m.start_dim, m.end_dim))
        if isinstance(m, nn.LocalResponseNorm):
            return self.elementwise(node, x, "lrn", [("size", m.size), ("alpha", "%g" % m.alpha),
                                                     ("beta", "%g" % m.beta), ("k", "%g" % m.k)])
        if isinstance(m, nn.MultiheadAttention):
            query = args[0] if args else kwargs.get("query")
            key = args[1] if len(args) > 1 else kwargs.get("key")
            value = args[2] if len(args) > 2 else kwargs.get("value")
            if not (query is key is value):
                raise ExportError("a multi-head attention over different query, key and value (self-attention only)")
            if not m._qkv_same_embed_dim or m.in_proj_weight is None or m.bias_k is not None or m.add_zero_attn:
                raise ExportError("a multi-head attention other than PyTorch's packed self-attention")
            if m.dropout > 0 or not m.batch_first:
                raise ExportError("a multi-head attention with dropout, or batch_first=False")
            t = self.plain(self.tensor(query), node, 3)
            tokens, dim = self.base_dims(t)
            qkv = self.linear(node, name + ".in_proj", query, m.in_proj_weight, m.in_proj_bias,
                              name + ".in_proj_weight", name + ".in_proj_bias")
            layer = self.emit(name, "attention", [qkv], [("heads", m.num_heads)],
                              "softmax(q @ k^T / sqrt(d)) @ v per head of PyTorch's MultiheadAttention")
            att = self.plain_tensor(layer, [tokens, dim])
            out = self.linear(node, name + ".out_proj", att, m.out_proj.weight, m.out_proj.bias,
                              name + ".out_proj.weight", name + ".out_proj.bias")
            return (out, None)
        raise ExportError("a module of type %s, which mplan has no layer for" % type(m).__name__)

    def call_function(self, node, f, args, kwargs):
        def arg(i, key, default=None):
            return self.value(args[i]) if len(args) > i else self.value(kwargs.get(key, default))

        if f in (operator.add, operator.iadd, torch.add):
            return self.add(node, args[0], args[1])
        if f in (operator.mul, operator.imul, torch.mul):
            a, b = self.value(args[0]), self.value(args[1])
            if not isinstance(a, (Tensor, Param)) and not isinstance(b, (Tensor, Param)):
                return self.arith(f, a, b)
            return self.mul(node, args[0], args[1])
        if f in (operator.floordiv, operator.truediv, operator.sub, operator.eq, operator.ne, operator.mod):
            return self.arith(f, self.value(args[0]), self.value(args[1]))
        if f is getattr:
            obj, attr = self.value(args[0]), args[1]
            if isinstance(obj, Tensor) and attr == "shape":
                return tuple(obj.view.dims())
            if isinstance(obj, Tensor) and attr == "ndim":
                return obj.view.rank()
            if isinstance(obj, Param):
                return getattr(obj.tensor, attr)
            raise ExportError("reads the attribute %s" % attr)
        if f is operator.getitem:
            return self.getitem(node, args[0], self.value(args[1]))
        if f in (torch.flatten,):
            return self.view_op(node, args[0], "flatten", (arg(1, "start_dim", 0), arg(2, "end_dim", -1)))
        if f in (torch.reshape,):
            return self.view_op(node, args[0], "reshape", (arg(1, "shape"),))
        if f in (torch.permute,):
            return self.view_op(node, args[0], "permute", (arg(1, "dims"),))
        if f in (torch.transpose,):
            return self.view_op(node, args[0], "transpose", (arg(1, "dim0"), arg(2, "dim1")))
        if f in (torch.cat, torch.concat):
            return self.cat(node, list(args[0]), arg(1, "dim", 0))
        if f in (F.relu, torch.relu):
            return self.elementwise(node, args[0], "relu")
        if f is F.relu6:
            return self.elementwise(node, args[0], "clip", [("min", "0"), ("max", "6")])
        if f is F.hardtanh:
            return self.elementwise(node, args[0], "clip", [("min", "%g" % arg(1, "min_val", -1.0)),
                                                            ("max", "%g" % arg(2, "max_val", 1.0))])
        simple = {F.hardswish: "hardswish", F.hardsigmoid: "hardsigmoid", F.silu: "silu", torch.sigmoid: "sigmoid",
                  F.sigmoid: "sigmoid"}
        if f in simple:
            return self.elementwise(node, args[0], simple[f])
        if f is F.gelu:
            approximate = arg(1, "approximate", "none")
            return self.elementwise(node, args[0], "gelu", [("approximate", "tanh")] if approximate == "tanh" else [])
        if f in (F.softmax, torch.softmax):
            t = self.tensor(args[0])
            dim = arg(1, "dim")
            rank = t.view.rank()
            if dim is None or dim % rank != rank - 1 or t.view.whole_base_axis(rank - 1) != len(self.base_dims(t)):
                raise ExportError("a softmax over another axis than the last")
            return self.elementwise(node, args[0], "softmax")
        if f is F.dropout:
            p, training = arg(1, "p", 0.5), arg(2, "training", True)
            if p == 0 or not training:
                return self.value(args[0])
            return self.elementwise(node, args[0], "dropout", [("p", "%g" % p)])
        if f is F.adaptive_avg_pool2d:
            return self.adaptive_pool(node, node.name, args[0], arg(1, "output_size"))
        if f is F.avg_pool2d:
            return self.pool(node, node.name, args[0], False, arg(1, "kernel_size"), arg(2, "stride"),
                             arg(3, "padding", 0), arg(4, "ceil_mode", False), arg(5, "count_include_pad", True))
        if f is F.max_pool2d:
            return self.pool(node, node.name, args[0], True, arg(1, "kernel_size"), arg(2, "stride"),
                             arg(3, "padding", 0), arg(5, "ceil_mode", False))
        if f is F.layer_norm:
            w, b = arg(2, "weight"), arg(3, "bias")
            return self.layernorm(node, node.name, args[0], arg(1, "normalized_shape"), w.tensor if w else None,
                                  b.tensor if b else None, arg(4, "eps", 1e-5), w.name if w else "",
                                  b.name if b else "")
        if f in (torch.matmul, operator.matmul, torch.bmm):
            return self.matmul(node, args[0], args[1])
        if f in (torch.chunk, torch.split):
            return self.call_method(node, f.__name__, args, kwargs)
        name = getattr(f, "__name__", str(f))
        if name in ("_assert",):
            return None
        if name == "stochastic_depth":  # torchvision's: the identity in eval mode (docs/import.md)
            return self.value(args[0])
        raise ExportError("the function %s, which mplan has no layer for" % name)

    def arith(self, f, a, b):
        if isinstance(a, Dim) or isinstance(b, Dim):
            if f is operator.mul:
                return dim_mul(a, b)
            if f in (operator.floordiv, operator.truediv):
                r = dim_div(a, b)
                if r is None:
                    raise ExportError("divides the batch size by a number that does not divide it")
                return r if f is operator.floordiv else r
            if f is operator.eq:
                return as_dim(a) == as_dim(b)
            if f is operator.ne:
                return not as_dim(a) == as_dim(b)
            if f is operator.sub and isinstance(a, Dim) and isinstance(b, Dim) and a.batch == b.batch:
                return Dim(a.coef - b.coef, a.batch)
            raise ExportError("computes with the batch size in a way mplan cannot follow")
        return f(a, b)

    def call_method(self, node, method, args, kwargs):
        x = args[0]
        rest = [self.value(a) for a in args[1:]]
        if method in ("view", "reshape"):
            return self.view_op(node, x, "reshape", rest)
        if method == "permute":
            return self.view_op(node, x, "permute", rest)
        if method == "transpose":
            return self.view_op(node, x, "transpose", rest)
        if method == "flatten":
            return self.view_op(node, x, "flatten", rest or [kwargs.get("start_dim", 0), kwargs.get("end_dim", -1)])
        if method in ("unsqueeze", "squeeze"):
            return self.view_op(node, x, method, rest)
        if method in ("contiguous", "clone"):
            return self.value(x)
        if method == "dim":
            return self.tensor(x).view.rank()
        if method == "size":
            v = self.value(x)
            dims = v.view.dims()
            return dims[rest[0]] if rest else tuple(dims)
        if method in ("chunk", "split"):
            t = self.tensor(x)
            dims = t.view.dims()
            dim = rest[1] if len(rest) > 1 else kwargs.get("dim", 0)
            dim %= len(dims)
            size = dims[dim].coef
            if method == "chunk":
                n = rest[0]
                step = -(-size // n)
                sizes = [min(step, size - k * step) for k in range(n) if k * step < size]
            else:
                s = rest[0]
                sizes = list(s) if isinstance(s, (tuple, list)) else [min(s, size - k) for k in range(0, size, s)]
            out, begin = [], 0
            for k, s in enumerate(sizes):
                out.append(self.slice_axis(node, t, dim, begin, begin + s, "%s_%d" % (node.name, k)))
                begin += s
            return tuple(out)
        if method == "expand":
            v = self.value(x)
            if isinstance(v, Param):
                shape = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
                if as_dim(shape[0]) == Dim(1, True) and v.tensor.shape[0] == 1:
                    return Expanded(v)
            raise ExportError("an expand other than a parameter's over the batch (a class token)")
        if method == "mean":
            t = self.tensor(x)
            dims = rest[0] if rest else kwargs.get("dim")
            keepdim = rest[1] if len(rest) > 1 else kwargs.get("keepdim", False)
            dims = sorted(d % 4 for d in (dims if isinstance(dims, (tuple, list)) else [dims]))
            if dims != [2, 3]:
                raise ExportError("a mean over other axes than H and W")
            out = self.adaptive_pool(node, node.name, x, 1)
            if not keepdim:
                out = Tensor(out.base, out.view.copy())
                out.view.reshape([Dim(1, True), Dim(self.base_dims(out)[0])])
            return out
        raise ExportError("the tensor method %s, which mplan has no layer for" % method)

    # -- the whole module ---------------------------------------------------------------------------------
    def run(self):
        was_training = self.module.training
        self.module.eval()  # inference control flow (no auxiliary heads); batch norm still trains in mplan
        try:
            example = torch.zeros([max(self.batch, 2)] + self.input_shape)
            graph = trace(self.module, example)
        except Exception as e:  # noqa: BLE001 - fx raises many kinds
            raise ExportError("torch.fx cannot trace the module: %s" % e)
        finally:
            self.module.train(was_training)
        modules = dict(self.module.named_modules())
        logits = None
        for node in graph.nodes:
            try:
                result = self.run_node(node, modules)
            except _FromEarlier:
                continue
            except (ExportError, TypeError, ValueError, IndexError, KeyError, AttributeError) as e:
                where = node.target if node.op == "call_module" else node.name
                self.problems.append("%s (%s %s): %s" % (node.name, node.op, getattr(where, "__name__", where), e))
                continue
            if node.op == "output":
                logits = result
            else:
                self.values[node.name] = result
        if self.problems:
            raise ExportError("%d op%s cannot be exported, so nothing was written:\n  %s" %
                              (len(self.problems), "" if len(self.problems) == 1 else "s", "\n  ".join(self.problems)))
        if isinstance(logits, (tuple, list)):
            logits = logits[0]
        if isinstance(logits, dict):
            logits = next(iter(logits.values()))
        if not isinstance(logits, Tensor):
            raise ExportError("the module's output is not a tensor computed from its input")
        logits = self.plain(logits, graph.output_node if hasattr(graph, "output_node") else list(graph.nodes)[-1], 2)
        return logits


def export(module, input_shape, batch, classes=None, name="model", lr=0.01, momentum=0.9, weight_decay=0.0,
           precision=None):
    """Exports `module` for images of `input_shape` [C, H, W] in mini-batches of
    `batch`. Returns (yaml_text, weights, names): weights maps each file name of
    the --load folder ("<layer>.weight") to a float32 array of mplan's shape, names
    maps PyTorch's tensor names (state_dict keys) to those file names."""
    ex = Exporter(module, input_shape, batch)
    logits = ex.run()
    out_layer = ex.bases[logits.base][0]
    if out_layer < 0:
        raise ExportError("the logits are the input itself")
    found_classes = ex.bases[logits.base][1][0]
    if classes is not None and classes != found_classes:
        raise ExportError("--classes %d does not match the logits' %d values" % (classes, found_classes))
    # Keep what the logits depend on.
    needed = {ex.layers[out_layer]["name"]}
    for layer in reversed(ex.layers[:out_layer + 1]):
        if layer["name"] in needed:
            needed.update(layer["inputs"])
    layers = [l for l in ex.layers[:out_layer + 1] if l["name"] in needed]
    weights, names = {}, {}
    used = set()
    for l in layers:
        for suffix, torch_name, t in l["tensors"]:
            key = "%s.%s" % (l["name"], suffix)
            weights[key] = t.detach().cpu().numpy().astype(np.float32)
            names[torch_name] = key
            used.add(torch_name)
    params = sum(p.numel() for p in module.parameters())
    exported = sum(weights[k].size for k in weights if not k.endswith((".running_mean", ".running_var")))
    lines = ["# Exported by tools/mplan_export.py from the PyTorch module %s (torch %s)." %
             (type(module).__name__, torch.__version__),
             "# Layers are named after the modules (or functions) they come from; parameters: %d." % exported]
    if exported != params:
        lines.append("# Note: the module has %d parameters; its layers on the way to the logits use %d." %
                     (params, exported))
    lines += ['name: "%s"' % name, "input: [%s]" % ", ".join(map(str, input_shape)), "batch: %d" % batch,
              "classes: %d" % found_classes,
              "optimizer: {kind: sgd, lr: %g, momentum: %g, weight_decay: %g}" % (lr, momentum, weight_decay)]
    if precision is not None:
        lines.append("precision: %s" % precision)
    lines.append("layers:")
    previous = "input"
    for l in layers:
        text = "  - {name: %s, op: %s" % (l["name"], l["op"])
        if not (len(l["inputs"]) == 1 and l["inputs"][0] == previous):
            text += ", in: " + (l["inputs"][0] if len(l["inputs"]) == 1 else "[%s]" % ", ".join(l["inputs"]))
        for k, v in l["fields"]:
            text += ", %s: %s" % (k, v)
        text += "}"
        if l["note"]:
            text += "  # " + l["note"]
        lines.append(text)
        previous = l["name"]
    loss = "loss"
    while loss in ex.names:
        loss += "_"
    lines.append("  - {name: %s, op: softmax_xent%s}  # appended: the loss on the logits" %
                 (loss, "" if previous == layers[-1]["name"] else ", in: " + layers[-1]["name"]))
    return "\n".join(lines) + "\n", weights, names


def checkpoint_state_dict(module, input_shape, batch, folder):
    """The state dict of `module` with the tensors of a checkpoint of the
    generated program (docs/generated-program.md, "Checkpoints"): `folder` is a
    --save folder (its `latest` is followed), one of its step folders, or a
    --load folder of .npy files. The names are mapped back through the export of
    `module` at (input_shape, batch); parameters and batch norm's running
    statistics come from the checkpoint, anything the export has no tensor for
    (num_batches_tracked) stays the module's. Raises ExportError naming a
    missing file or a tensor of another size."""
    _, weights, names = export(module, input_shape, batch)
    latest = os.path.join(folder, "latest")
    if os.path.exists(latest):
        folder = os.path.realpath(latest)
    state = module.state_dict()
    loaded = 0
    for torch_name, key in sorted(names.items()):
        path = os.path.join(folder, key + ".npy")
        if not os.path.isfile(path):
            raise ExportError("%s: missing (the checkpoint of another model?)" % path)
        array = np.load(path)
        target = state[torch_name]
        if array.size != target.numel():
            raise ExportError("%s: %d values, PyTorch's %s has %d" % (path, array.size, torch_name, target.numel()))
        state[torch_name] = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).reshape(
            target.shape).to(target.dtype)
        loaded += 1
    if loaded != len(weights):
        raise ExportError("%d of the export's %d tensors map to PyTorch names" % (loaded, len(weights)))
    return state


def _load_module(spec):
    if spec.startswith("torchvision:"):
        import torchvision
        return getattr(torchvision.models, spec.split(":", 1)[1])()
    if ":" not in spec:
        raise ExportError("MODEL must be torchvision:NAME or MODULE:FUNCTION, got %r" % spec)
    where, function = spec.rsplit(":", 1)
    if where.endswith(".py"):
        loader = importlib.util.spec_from_file_location("mplan_export_model", where)
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    return getattr(module, function)()


def main(argv=None):
    parser = argparse.ArgumentParser(description="Export a torch.nn.Module to mplan's model YAML (docs/import.md).")
    parser.add_argument("model", help="torchvision:NAME, MODULE:FUNCTION or FILE.py:FUNCTION (returns the module)")
    parser.add_argument("-o", "--out", required=True,
                        help="the model YAML to write (with --from-checkpoint: the state dict file)")
    parser.add_argument("--input", required=True, help="the per-sample input shape C,H,W")
    parser.add_argument("--batch", type=int, required=True, help="the mini-batch size")
    parser.add_argument("--classes", type=int, help="the number of classes (default: the size of the logits)")
    parser.add_argument("--name", help="the model's name (default: the output file's)")
    parser.add_argument("--state-dict", help="weights saved with torch.save(model.state_dict())")
    parser.add_argument("--weights", help="also write the weights as a --load folder (.npy files)")
    parser.add_argument("--names", help="also write PyTorch's tensor names -> mplan's as JSON")
    parser.add_argument("--from-checkpoint", metavar="DIR",
                        help="instead of exporting: load the program's checkpoint DIR into the module and write its "
                             "state dict (torch.save) to the file -o names")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--precision", choices=["fp32", "tf32", "bf16", "fp16"],
                        help="the model's precision (docs/model-format.md; default: none written, fp32 tensors)")
    a = parser.parse_args(argv)
    try:
        shape = [int(s) for s in a.input.split(",")]
        if len(shape) != 3 or min(shape) < 1:
            raise ValueError
    except ValueError:
        parser.error("--input must be C,H,W (three sizes >= 1), got %r" % a.input)
    if a.batch < 1:
        parser.error("--batch must be at least 1")
    try:
        module = _load_module(a.model)
        if a.state_dict:
            module.load_state_dict(torch.load(a.state_dict, map_location="cpu"))
        if a.from_checkpoint:
            state = checkpoint_state_dict(module, shape, a.batch, a.from_checkpoint)
            module.load_state_dict(state)
            torch.save(module.state_dict(), a.out + ".tmp")
            os.replace(a.out + ".tmp", a.out)
            print("loaded %s into %s's state dict, written to %s" % (a.from_checkpoint, a.model, a.out))
            return 0
        name = a.name or os.path.splitext(os.path.basename(a.out))[0]
        text, weights, names = export(module, shape, a.batch, a.classes, name, a.lr, a.momentum, a.weight_decay,
                                      a.precision)
    except ExportError as e:
        print("mplan_export: error: %s" % e, file=sys.stderr)
        return 1
    with open(a.out + ".tmp", "w") as f:
        f.write(text)
    os.replace(a.out + ".tmp", a.out)
    if a.weights:
        os.makedirs(a.weights, exist_ok=True)
        for key, array in weights.items():
            np.save(os.path.join(a.weights, key + ".npy"), array)
    if a.names:
        with open(a.names, "w") as f:
            json.dump(names, f, indent=1, sort_keys=True)
    print("exported %d layers to %s%s" % (text.count("\n  - "), a.out,
                                          " and %d tensors to %s" % (len(weights), a.weights) if a.weights else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
