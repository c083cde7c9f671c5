"""A step as Deeploy's training branch deploys it: two networks, run by its harness (deeploytraintest.c).

The branch (pull request 169, head a0e1e531; DeeployTest/testMVPTraining.py, testMVPOptimizer.py,
testUtils/codeGenerateTraining.py) compiles a step's two graphs as two networks linked into one program:
- the TrainingNetwork (the train graph: forward, backward, gradients accumulated in place), named like any
  Deeploy network (`DeeployNetwork_*`) but entered through `InitTrainingNetwork` / `RunTrainingNetwork`;
- the OptimizerNetwork (the optimizer graph), whose symbols are `DeeployOptNetwork_*`, entered through
  `InitOptimizerNetwork` / `RunOptimizerNetwork`. Its inputs are the train network's weights and accumulated
  gradients and its outputs the updated weights: the branch points each of them at the train network's buffer
  (the update is written in place, one weight tile read before the same tile is written), and it gives the
  optimizer the train network's L1 arena (the two never run at once; the train arena is made large enough).
The harness runs Init of both, then per mini-batch copies the mini-batch's data in, sets `lazy_reset_grad`, runs
the train network and reads its loss; after each accumulation it runs the optimizer. ckpt deploys the same way,
with its own code, and with two differences the harness needs to run as written:
- every graph input lives to the end of the step in the tiled arena (weights and accumulators persist from one
  mini-batch to the next, as the branch's TrainingMemoryScheduler makes them);
- the buffers the harness touches at every mini-batch (the data inputs, the reset flag, the loss) are on chip
  for the harness whatever the home level: the harness at a0e1e531 copies them with memcpy only where the pointer
  is on chip (an address above 0x10000000), so in L3 they would keep their first values. Where the network keeps
  one off chip, the harness is given a mirror of it in L2 (`DeeployNetwork_inputs[i]` / `_outputs[o]` point at
  the mirror): the train network copies the mirrored inputs into L3 when it starts and the mirrored outputs out
  when it ends, as the branch's notes say its `l3_aware_copy` does (README_TRAINING.md).
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field

import onnx
from Deeploy.DeeployTypes import NodeTemplate
from Deeploy.TilingExtension.MemoryScheduler import MemoryScheduler

from .buffers import buffer_bytes
from .errors import BridgeError
from .naming import io_mapping
from .write_back import CHUNK, copy_code


@dataclass(frozen=True)
class Network:
    """How one generated network is named in C: its files, its symbols' prefix and its two entry points."""

    stem: str = "Network"                         # <stem>.c / <stem>.h
    prefix: str = "DeeployNetwork"                # Deeploy's context name: <prefix>_input_0, ...
    run: str = "RunNetwork"
    init: str = "InitNetwork"
    params: str = "uint32_t core_id, uint32_t numThreads"   # "" declares the entries as the branch does: ()
    files: str = ""                               # prefix of the data files its Init loads ("opt_" + "0.hex")

    def declarations(self) -> list[str]:
        if not self.params:
            return [f"void {self.run}();", f"void {self.init}();"]
        return [f"void {self.run}({self.params});", f"void {self.init}({self.params});"]

    def definition(self, entry: str) -> str:
        if not self.params:
            return f"void {entry}() {{"
        unused = ", ".join(f"__attribute__((unused)) {p.strip()}" for p in self.params.split(","))
        return f"void {entry}({unused}) {{"


SINGLE = Network()
TRAINING = Network("TrainingNetwork", run="RunTrainingNetwork", init="InitTrainingNetwork", params="")
OPTIMIZER = Network("OptimizerNetwork", "DeeployOptNetwork", "RunOptimizerNetwork", "InitOptimizerNetwork", "",
                    "opt_")


@dataclass(frozen=True)
class TrainRole:
    """The train graph as the branch's harness runs it (see the module doc)."""

    on_chip: tuple[str, ...]                      # graph I/O (Deeploy's names) the harness touches per mini-batch
    arena_floor: tuple[tuple[str, int], ...] = ()  # (level, bytes): the arena the optimizer borrows holds as much
    network: Network = field(default=TRAINING, repr=False)

    def key(self) -> dict:
        return {"role": "train", "on_chip": list(self.on_chip), "arena_floor": [list(f) for f in self.arena_floor]}


@dataclass(frozen=True)
class OptimizerRole:
    """The optimizer graph as the branch's harness runs it: its I/O are the train network's buffers."""

    shared: tuple[tuple[str, str], ...]           # (its I/O, Deeploy's name) -> the train network's buffer symbol
    borrowed: tuple[str, ...] = ("L1",)           # arenas it takes from the train network
    repeats: tuple[tuple[str, int], ...] = ()     # (an update, times): the train network holds that weight repeated
    network: Network = field(default=OPTIMIZER, repr=False)

    def brought(self, train_names: tuple[str, ...] | frozenset[str]) -> frozenset[str]:
        """Its I/O whose bytes are the train network's buffers named (Deeploy's names, e.g. `input_3`)."""
        symbols = {f"DeeployNetwork_{name}" for name in train_names}
        return frozenset(own for own, symbol in self.shared if symbol in symbols)

    def key(self) -> dict:
        return {"role": "optimizer", "shared": [list(s) for s in self.shared], "borrowed": list(self.borrowed),
                "repeats": [list(r) for r in self.repeats]}


Role = TrainRole | OptimizerRole


def optimizer_role(train_io: dict[str, str], optimizer: onnx.ModelProto,
                   train_elements: dict[str, int] | None = None) -> OptimizerRole:
    """Which train-network buffer each optimizer input and output is, matched by name as the branch does (an input
    by its own name; an update by the weight its node reads), and checked against the harness's fixed pairing
    (optimizer input 2i the i-th weight, 2i+1 its gradient, output i its update). `train_io`: the train graph's
    original I/O name -> Deeploy's; `train_elements`: the train network's inputs' element counts (Deeploy's
    lowering repeats a bias it broadcasts, [256] into [64, 256]: the optimizer updates one copy and copies it over
    the others). Raises BridgeError naming the first tensor that does not pair."""
    graph = optimizer.graph
    own = io_mapping(graph)
    sizes = {i.name: _elements(i) for i in graph.input}
    shared, repeats = [], []
    for info in graph.input:
        if info.name not in train_io:
            raise BridgeError(f"the optimizer graph reads '{info.name}', which the train graph does not take: the "
                              "two graphs are not one step")
        shared.append((own[info.name], f"DeeployNetwork_{train_io[info.name]}"))
    writer = {out: node for node in graph.node for out in node.output}
    for info in graph.output:
        node = writer.get(info.name)
        weight = node.input[0] if node is not None and node.input else None
        if weight not in train_io:
            raise BridgeError(f"the optimizer graph's output '{info.name}' updates no weight of the train graph")
        shared.append((own[info.name], f"DeeployNetwork_{train_io[weight]}"))
        held = (train_elements or {}).get(train_io[weight], sizes[weight])
        if held != sizes[weight] and sizes[weight] and held % sizes[weight] == 0:
            repeats.append((own[info.name], held // sizes[weight]))
    _check_harness_pairing(graph, train_io)
    return OptimizerRole(tuple(shared), repeats=tuple(repeats))


def _elements(info: onnx.ValueInfoProto) -> int:
    count = 1
    for dim in info.type.tensor_type.shape.dim:
        count *= dim.dim_value
    return count


def repeat_code(ctxt, role: Role | None, off_chip: str) -> str:
    """C for the end of the optimizer's step: each weight the train network holds repeated takes its update in
    every copy (see optimizer_role)."""
    if not isinstance(role, OptimizerRole) or not role.repeats:
        return ""
    lines = ["// ckpt: the train network repeats these weights; every copy takes the update (split_step)",
             f"int8_t ckpt_repeat[{CHUNK}];"]
    for update, times in role.repeats:
        lines += copy_code(ctxt, update, update, times, "ckpt_repeat", off_chip)
    return "\n".join(lines) + "\n"


def _check_harness_pairing(graph: onnx.GraphProto, train_io: dict[str, str]) -> None:
    """The harness pairs by position: optimizer input 2i <- train input (first weight + i), 2i+1 <- train input
    (first gradient buffer + i), output i -> the weight. The names must say the same."""
    names = [i.name for i in graph.input]
    weights, grads = names[0::2], names[1::2]
    index = {name: int(d[len("input_"):]) for name, d in train_io.items() if d.startswith("input_")}
    for k, (w, g) in enumerate(zip(weights, grads)):
        if index[w] - index[weights[0]] != k or index[g] - index[grads[0]] != k:
            raise BridgeError(f"the optimizer graph's inputs {k * 2} and {k * 2 + 1} ('{w}', '{g}') are not the "
                              f"train graph's weight {k} and its gradient buffer, as the harness pairs them")
    if len(weights) != len(grads) or len(graph.output) != len(weights):
        raise BridgeError(f"the optimizer graph reads {len(names)} inputs and writes {len(graph.output)} outputs: "
                          "the harness expects a (weight, gradient) pair per update")


class PersistentInputs(MemoryScheduler):
    """Deeploy's memory scheduler with every graph input alive to the end of the step: a training step's weights
    and accumulators outlive the step (what the branch's TrainingMemoryScheduler does)."""

    def _calculateLifetimes(self, ctxt, patternMemoryConstraint, memoryLevel):
        lifetimes, tensors = super()._calculateLifetimes(ctxt, patternMemoryConstraint, memoryLevel)
        end = len(patternMemoryConstraint.nodeConstraints)
        for name in list(lifetimes):
            if getattr(ctxt.lookup(name), "is_input", False):
                lifetimes[name] = (0, end)
        return lifetimes, tensors


def share_buffers(deployer, role: OptimizerRole, persistent: str, default: str, brought: tuple[str, ...]) -> None:
    """Before tiling: no home level lays out room for the shared I/O buffers (the train network holds their bytes;
    ckpt's allocator leaves them out, Deeploy's own would place them, unused): the `persistent` level for those the
    train network keeps there, the `default` level for those it `brought` on chip (split+). A shared buffer's tiles
    in the level it is not homed in are laid out as any tile."""
    tiler = getattr(deployer, "tiler", None)
    if tiler is not None and hasattr(tiler, "outside"):
        on_chip = role.brought(brought)
        shared = frozenset(name for name, _ in role.shared)
        tiler.outside = {persistent: shared - on_chip} if persistent != default else {persistent: shared}
        if persistent != default:
            tiler.outside[default] = on_chip


@contextlib.contextmanager
def shared_allocation(ctxt, role: Role | None, arena_name: str):
    """While the optimizer's allocation code is generated: each shared buffer is a pointer to the train network's
    (no allocation, no data file) and each borrowed arena the train network's."""
    if not isinstance(role, OptimizerRole):
        yield
        return
    saved = []
    for name, symbol in role.shared:
        buf = ctxt.lookup(name)
        saved.append((buf, buf.allocTemplate, buf._users))
        buf.allocTemplate = NodeTemplate(f"${{name}} = (${{type.typeName}}) {symbol};")
        buf._users = []                  # Siracusa's deployer loads a file into every used L3 buffer
    for level in role.borrowed:
        name = f"{arena_name}_{level}"
        if name in ctxt.globalObjects:
            buf = ctxt.lookup(name)
            saved.append((buf, buf.allocTemplate, buf._users))
            buf.allocTemplate = NodeTemplate(f"${{name}} = (${{type.typeName}}) DeeployNetwork_{name};")
    try:
        yield
    finally:
        for buf, template, users in saved:
            buf.allocTemplate, buf._users = template, users


def raise_arena_floor(ctxt, role: Role | None, arena_name: str) -> None:
    """Make each arena the optimizer borrows at least as large as the optimizer needs."""
    if not isinstance(role, TrainRole):
        return
    for level, floor in role.arena_floor:
        name = f"{arena_name}_{level}"
        if name in ctxt.globalObjects and int(ctxt.lookup(name).shape[0]) < floor:
            ctxt.lookup(name).shape = [floor]


_FILE = re.compile(r'"(\d+)\.hex"')


def rename_files(code: str, ctxt, network: Network) -> str:
    """The data files a network's Init loads, renamed with its file prefix (two networks load files side by
    side), in the code and on the buffers (`extName`, which names the files written)."""
    if not network.files:
        return code
    for buf in ctxt.globalObjects.values():
        ext = getattr(buf, "extName", None)
        if ext is not None and not str(ext).startswith(network.files):
            buf.extName = f"{network.files}{ext}"
    return _FILE.sub(lambda m: f'"{network.files}{m.group(1)}.hex"', code)


@dataclass(frozen=True)
class MirrorCode:
    """C for the on-chip mirrors of the harness's off-chip I/O (see the module doc)."""

    declarations: str = ""
    init: str = ""              # after the buffers are allocated: the mirrors, and the harness's pointers to them
    prologue: str = ""          # at the start of the step: mirrored inputs into their buffers
    epilogue: str = ""          # at its end: mirrored outputs out of theirs
    nbytes: int = 0             # the mirrors' bytes, on chip


def mirror_code(ctxt, role: Role | None, off_chip: str, graph_inputs: list[str], graph_outputs: list[str]
                ) -> MirrorCode:
    """The mirrors a train network's harness I/O needs where the network keeps it in `off_chip`."""
    if not isinstance(role, TrainRole):
        return MirrorCode()
    decl, init, pro, epi, total = [], [], [], [], 0
    for name in role.on_chip:
        buf = ctxt.lookup(name)
        if getattr(buf, "_memoryLevel", None) != off_chip:
            continue
        size = int(buffer_bytes(buf))
        total += size
        symbol, mirror = ctxt._mangle(name), f"ckpt_mirror_{name}"
        decl.append(f"static int8_t* {mirror};")
        init.append(f"{mirror} = (int8_t*) pi_l2_malloc({size});")
        if name in graph_inputs:
            init.append(f"{ctxt._mangle('inputs')}[{graph_inputs.index(name)}] = (void*) {mirror};")
            pro.append(f"cl_ram_write({symbol}, {mirror}, {size});")
        else:
            init.append(f"{ctxt._mangle('outputs')}[{graph_outputs.index(name)}] = (void*) {mirror};")
            epi.append(f"cl_ram_read({mirror}, {symbol}, {size});")
    note = "// ckpt: the harness reads and writes these on chip; the network keeps them off chip (split_step)"
    wrap = lambda lines: "\n".join([note, *lines]) + "\n" if lines else ""  # noqa: E731
    return MirrorCode(wrap(decl), wrap(init), wrap(pro), wrap(epi), total)
