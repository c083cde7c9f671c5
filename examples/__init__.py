"""Built-in training-graph generators shaped like Deeploy's CCT training graphs.

Every generator returns one training step (forward, backward, SGD) as an ``onnx.ModelProto`` with
value_info for every tensor, nodes in topological order, inputs ``input`` and ``labels`` and the
updated weights as outputs. Same arguments give a byte-identical serialisation.
"""

from .cct import TrainSet, cct
from .mlp import mlp
from .resnet import resnet
from .validate import checkable, graph_problems
from .write import KINDS, WrittenExample, build, example_inputs, save_npz, write_example

__all__ = ["mlp", "cct", "resnet", "TrainSet", "build", "write_example", "example_inputs", "save_npz",
           "WrittenExample", "KINDS", "checkable", "graph_problems"]
