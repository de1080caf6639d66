"""Output heads: one contract for every registered head, then what is special to each."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from nlgkit.core.errors import ConfigError
from nlgkit.heads import HEADS, HeadContext, OutputHead, build_head
from nlgkit.heads.hadamard import fwht, sylvester_hadamard

PAD = 1
D, V, E = 8, 13, 6  # feature dim, vocabulary, embedding dim (≠ D: the tied head gets a projection)

# Small per-head settings; a head not listed here is tested with its defaults.
SMALL: dict[str, dict[str, Any]] = {"fixed": {"init": "l2"}, "tied": {"projection_activation": "tanh"},
                                    "joint": {"joint_dim": 4}}
FIXED_CASES = [("fixed", {"init": init}) for init in ("uniform", "normal", "l2", "rademacher", "orthogonal")]
FIXED_CASES.append(("hadamard", {}))
FIXED_IDS = [options.get("init", name) for name, options in FIXED_CASES]


def make_head(name: str, d: int = D, vocab: int = V, emb: nn.Embedding | None = None, seed: int = 1,
              **options: Any) -> OutputHead:
    config = HEADS.config_class(name)(type=name, **{**SMALL.get(name, {}), **options})
    emb = emb if emb is not None else nn.Embedding(vocab, E, padding_idx=PAD)
    context = HeadContext(feature_dim=d, vocab_size=vocab, pad_index=PAD, target_embedding=emb, seed=seed)
    return build_head(config, context)


def trainable(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def batch(seed: int = 0, b: int = 3, t: int = 5, d: int = D, vocab: int = V) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    features = torch.randn(b, t, d, generator=g)  # (B, T, d)
    targets = torch.randint(0, vocab, (b, t), generator=g)  # (B, T)
    targets[targets == PAD] = 0
    targets[0, -2:] = PAD
    targets[2, -1] = PAD
    return features, targets


# --- the contract -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", HEADS.names())
def test_contract(name: str) -> None:
    torch.manual_seed(0)
    head = make_head(name)
    features, targets = batch()
    log_probs = head.log_probs(features)
    assert log_probs.shape == (3, 5, V)
    scores, offset = head.search_scores(features)  # what beam search ranks: log_probs = scores - offset
    assert scores.shape == (3, 5, V) and offset.shape == (3, 5)
    torch.testing.assert_close(scores - offset.unsqueeze(-1), log_probs.float(), atol=1e-5, rtol=1e-6)
    features.requires_grad_(True)
    loss = head.loss(features, targets)
    assert loss.dim() == 0 and torch.isfinite(loss)
    if head.normalized:  # a probability head: normalised log-probabilities, and its loss is their NLL
        torch.testing.assert_close(log_probs.logsumexp(-1), torch.zeros(3, 5), atol=1e-5, rtol=0)
        reference = F.nll_loss(log_probs.reshape(-1, V), targets.reshape(-1), ignore_index=PAD, reduction="sum")
        torch.testing.assert_close(loss, reference, atol=1e-4, rtol=1e-5)
    else:  # a score head: finite search scores that rank words as its logits do
        assert torch.isfinite(log_probs).all()
        assert torch.equal(log_probs.argmax(-1), head.logits(features).argmax(-1))
    loss.backward()
    assert features.grad is not None and features.grad.abs().sum() > 0

    moved = features.detach().clone()
    moved[targets.eq(PAD)] = 100.0  # only padding positions change
    torch.testing.assert_close(head.loss(moved, targets), loss.detach())
    assert head.loss(moved, targets, label_smoothing=0.1).isfinite()

    vectors = head.target_vectors()
    assert vectors is None or vectors.shape[0] == V


def test_parameter_counts() -> None:
    assert trainable(make_head("learned")) == (D + 1) * V
    assert trainable(make_head("learned", bias=False)) == D * V
    assert trainable(make_head("fixed")) == 0 and trainable(make_head("hadamard")) == 0
    assert trainable(make_head("fixed", bias="learned")) == V
    assert make_head("fixed", bias="none").bias is None


# --- fixed heads ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "options"), FIXED_CASES, ids=FIXED_IDS)
def test_fixed_heads_never_train(name: str, options: dict[str, Any]) -> None:
    torch.manual_seed(0)
    head = make_head(name, **options)
    assert list(head.parameters()) == []
    before = {key: value.clone() for key, value in head.state_dict().items()}
    encoder = nn.Linear(D, D)  # the features are what learns
    optimizer = torch.optim.Adam(list(encoder.parameters()) + list(head.parameters()), lr=0.1)
    inputs, targets = batch()
    start = encoder.weight.detach().clone()
    for _ in range(3):
        optimizer.zero_grad()
        head.loss(encoder(inputs), targets).backward()
        optimizer.step()
    assert not torch.equal(encoder.weight, start)
    for key, value in head.state_dict().items():
        assert torch.equal(value, before[key]), key


@pytest.mark.parametrize(("name", "options"), FIXED_CASES, ids=FIXED_IDS)
def test_fixed_heads_are_regenerable(name: str, options: dict[str, Any]) -> None:
    vectors = make_head(name, seed=3, **options).target_vectors()
    torch.testing.assert_close(make_head(name, seed=3, **options).target_vectors(), vectors, rtol=0, atol=0)
    assert not torch.equal(make_head(name, seed=4, **options).target_vectors(), vectors)
    assert not torch.equal(make_head(name, seed=3, seed_offset=1, **options).target_vectors(), vectors)

    saved = make_head(name, seed=3, **options)
    loaded = make_head(name, seed=9, **options)
    loaded.load_state_dict(saved.state_dict())
    features, _ = batch()
    torch.testing.assert_close(loaded.logits(features), saved.logits(features), rtol=0, atol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize(("name", "options"), FIXED_CASES, ids=FIXED_IDS)
def test_fixed_heads_same_on_gpu(name: str, options: dict[str, Any]) -> None:
    cpu = make_head(name, d=16, vocab=40, **options)
    gpu = make_head(name, d=16, vocab=40, **options).cuda()
    features = torch.randn(4, 16)
    torch.testing.assert_close(gpu.logits(features.cuda()).cpu(), cpu.logits(features), atol=1e-4, rtol=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", HEADS.names())
def test_every_head_scores_alike_on_gpu(name: str) -> None:
    """The same weights give the same log-probabilities, search scores and loss on the GPU (float32)."""
    import copy

    torch.manual_seed(0)
    cpu = make_head(name)
    gpu = copy.deepcopy(cpu).cuda()
    features, targets = batch()
    torch.testing.assert_close(gpu.log_probs(features.cuda()).cpu(), cpu.log_probs(features), atol=1e-4, rtol=1e-4)
    for on_gpu, on_cpu in zip(gpu.search_scores(features.cuda()), cpu.search_scores(features), strict=True):
        torch.testing.assert_close(on_gpu.cpu(), on_cpu, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(gpu.loss(features.cuda(), targets.cuda()).cpu(), cpu.loss(features, targets),
                               atol=1e-3, rtol=1e-4)


def test_fixed_initialisations() -> None:
    rows = make_head("fixed", init="l2").weight
    torch.testing.assert_close(rows.norm(dim=1), torch.ones(V))
    torch.testing.assert_close(make_head("fixed", init="l2", row_norm=2.0).weight.norm(dim=1), torch.full((V,), 2.0))
    for a in (10.0, 0.5):
        cells = make_head("fixed", d=64, init="uniform", scale=a).weight
        assert cells.abs().max() <= a and cells.abs().max() > a / 2
    cells = make_head("fixed", d=64, vocab=200, init="normal", scale=3.0).weight
    assert 2.7 < cells.std() < 3.3
    cells = make_head("fixed", init="rademacher").weight
    torch.testing.assert_close(cells.abs(), torch.full((V, D), D**-0.5))
    wide = make_head("fixed", d=16, vocab=5, init="orthogonal").weight  # V ≤ d: orthonormal rows
    torch.testing.assert_close(wide @ wide.t(), torch.eye(5), atol=1e-5, rtol=0)
    tall = make_head("fixed", init="orthogonal", row_norm=2.0).weight  # V > d: orthogonal columns
    torch.testing.assert_close(tall.t() @ tall, torch.eye(D) * 4 * V / D, atol=1e-4, rtol=0)
    torch.testing.assert_close(tall.pow(2).sum(1).mean(), torch.tensor(4.0))
    with pytest.raises(ConfigError):
        HEADS.config_class("fixed")(type="fixed", scale=0.0).validate("recipe", None)


# --- tied -------------------------------------------------------------------------------------------------


def test_tied_shares_the_embedding() -> None:
    emb = nn.Embedding(V, E, padding_idx=PAD)
    head = make_head("tied", emb=emb)
    assert head.weight is emb.weight and head.weight.data_ptr() == emb.weight.data_ptr()
    assert sum(p.numel() for p in nn.ModuleList([emb, head]).parameters()) == V * E + D * E + V
    features, targets = batch()
    before = head.logits(features).detach()
    optimizer = torch.optim.SGD(emb.parameters(), lr=1.0)
    emb(targets).sum().backward()  # an update through the input path only
    optimizer.step()
    assert not torch.allclose(head.logits(features), before)
    torch.testing.assert_close(head.logits(features),
                               F.linear(torch.tanh(head.projection(features)), emb.weight, head.bias))


def test_tied_model_saves_and_loads(tmp_path: Any) -> None:
    from safetensors.torch import load_file, save_file

    def model() -> nn.ModuleDict:
        emb = nn.Embedding(V, E, padding_idx=PAD)
        return nn.ModuleDict({"emb": emb, "head": make_head("tied", emb=emb)})

    saved, loaded = model(), model()
    assert "head.weight" not in saved.state_dict()  # one name per storage: safetensors accepts it
    save_file({k: v.contiguous() for k, v in saved.state_dict().items()}, str(tmp_path / "m.safetensors"))
    loaded.load_state_dict(load_file(str(tmp_path / "m.safetensors")))
    assert loaded["head"].weight is loaded["emb"].weight
    features, _ = batch()
    torch.testing.assert_close(loaded["head"].logits(features), saved["head"].logits(features))
    with_weight = {**saved.state_dict(), "head.weight": saved["emb"].weight}  # older layout still loads
    model().load_state_dict(with_weight)


def test_tied_equals_learned_with_copied_weights() -> None:
    torch.manual_seed(0)
    learned = make_head("learned")
    emb = nn.Embedding(V, D, padding_idx=PAD)
    tied = make_head("tied", emb=emb)
    assert tied.projection is None
    with torch.no_grad():
        emb.weight.copy_(learned.weight)
        tied.bias.copy_(learned.bias)
    features, _ = batch()
    torch.testing.assert_close(tied.logits(features), learned.logits(features))


# --- hadamard ---------------------------------------------------------------------------------------------


def dense_rows(head: OutputHead) -> torch.Tensor:
    """Reference (V, d) rows from the dense Sylvester matrix."""
    matrix = sylvester_hadamard(head.order)
    return matrix[: head.vocab_size, head.columns] * head.signs * head.coefficient


def test_sylvester_and_fwht() -> None:
    matrix = sylvester_hadamard(16)
    torch.testing.assert_close(matrix @ matrix.t(), 16 * torch.eye(16))
    j, c = torch.meshgrid(torch.arange(16), torch.arange(16), indexing="ij")
    parity = torch.zeros_like(j)
    for bit in range(4):
        parity ^= ((j & c) >> bit) & 1
    torch.testing.assert_close(matrix, 1.0 - 2.0 * parity.float())
    x = torch.randn(4, 16)
    torch.testing.assert_close(fwht(x), x @ matrix.t(), atol=1e-5, rtol=0)


@pytest.mark.parametrize(("d", "vocab"), [(8, 13), (16, 5), (12, 40), (16, 16), (10, 300)])
def test_hadamard_matches_dense(d: int, vocab: int) -> None:
    head = make_head("hadamard", d=d, vocab=vocab, bias="learned", scale=2.0)
    with torch.no_grad():
        head.bias.normal_()
    rows = dense_rows(head)
    torch.testing.assert_close(head.target_vectors(), rows, atol=1e-5, rtol=0)
    features = torch.randn(3, 4, d)
    torch.testing.assert_close(head.logits(features), F.linear(features, rows, head.bias), atol=1e-4, rtol=0)
    torch.testing.assert_close(rows.norm(dim=1), torch.full((vocab,), 2.0))
    assert torch.unique(rows, dim=0).shape[0] == vocab  # every word its own target vector
    if d == head.order:
        torch.testing.assert_close(rows @ rows.t(), 4.0 * torch.eye(vocab), atol=1e-5, rtol=0)
    else:
        assert 0 not in head.columns.tolist()  # the all-ones column adds nothing under softmax


def test_hadamard_gradient_and_limits() -> None:
    head = make_head("hadamard", d=4, vocab=6).double()
    features = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(head.logits, (features,))
    with pytest.raises(ConfigError):
        make_head("hadamard", d=2, vocab=13)  # 2 ±1 coordinates cannot give 13 distinct rows


def test_hadamard_memory_is_linear() -> None:
    d, vocab = 512, 6000
    head = make_head("hadamard", d=d, vocab=vocab, bias="learned")
    stored = sum(t.numel() for t in head.buffers()) + sum(p.numel() for p in head.parameters())
    assert stored < vocab * d and stored <= 2 * d + vocab
    features = torch.randn(2, 3, d)
    logits = head.logits(features)  # (2, 3, V)
    assert logits.shape == (2, 3, vocab)
    j = torch.arange(0, vocab, 97)[:, None]  # a sample of rows, by the popcount formula
    bits = j & head.columns[None, :]
    parity = torch.zeros_like(bits)
    for bit in range(13):
        parity ^= (bits >> bit) & 1
    rows = (1.0 - 2.0 * parity.float()) * head.signs * head.coefficient  # (k, d)
    torch.testing.assert_close(logits[..., j[:, 0]], F.linear(features, rows, head.bias[j[:, 0]]),
                               atol=1e-4, rtol=1e-4)


# --- joint input-output embedding (Pappas et al.) ----------------------------------------------------------


def test_joint_with_identity_projections_and_no_activation_is_weight_tying() -> None:
    """Their Eq. 18: U = I, V = I, b_u = b_v = 0, σ = identity reduce the joint layer to tying."""
    emb = nn.Embedding(V, D, padding_idx=PAD)  # E = d, so tying needs no projection
    joint = make_head("joint", emb=emb, joint_dim=D, activation="none")
    tied = make_head("tied", emb=emb)
    with torch.no_grad():
        for proj in (joint.output_proj, joint.context_proj):
            proj.weight.copy_(torch.eye(D))
            proj.bias.zero_()
        joint.bias.copy_(torch.randn(V))
        tied.bias.copy_(joint.bias)
    features, _ = batch()
    torch.testing.assert_close(joint.logits(features), tied.logits(features))
    assert joint.weight is emb.weight  # shared, not copied


def test_joint_ablations_are_different_functions_with_their_own_shapes() -> None:
    emb = nn.Embedding(V, E, padding_idx=PAD)
    features, _ = batch()
    logits, sizes = {}, {}
    for structure in ("full", "output", "context", "bilinear"):
        torch.manual_seed(0)
        head = make_head("joint", emb=emb, joint_dim=5, structure=structure)
        logits[structure] = head.logits(features)
        sizes[structure] = trainable(head) - V * E - V  # beyond the shared embedding and the bias
        assert head.target_vectors().shape[0] == V
    assert sizes == {"full": E * 5 + 5 + D * 5 + 5, "output": E * D + D, "context": D * E + E, "bilinear": D * E}
    names = list(logits)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not torch.allclose(logits[a], logits[b]), (a, b)
    bilinear = make_head("joint", emb=emb, structure="bilinear")
    torch.testing.assert_close(bilinear.logits(features),  # E·W·h + b, no non-linearity
                               features @ bilinear.context_proj.weight.T @ emb.weight.T + bilinear.bias)


@pytest.mark.parametrize("fused_adam", [False, True])  # fused Adam does not bump version counters
def test_joint_output_table_is_computed_once_at_inference_and_follows_updates(fused_adam: bool) -> None:
    emb = nn.Embedding(V, E, padding_idx=PAD)
    head = make_head("joint", emb=emb).eval()
    features, targets = batch()
    with torch.no_grad():
        first = head.output_table()
        assert head.output_table() is first  # reused at every decoding step
        before = head.logits(features)
    head.train()
    optimizer = (torch.optim.Adam(head.parameters(), lr=0.5, fused=True) if fused_adam
                 else torch.optim.SGD(head.parameters(), lr=0.5))
    head.loss(features, targets).backward()
    optimizer.step()
    head.eval()
    with torch.no_grad():
        assert head.output_table() is not first  # a changed weight is never scored with a stale table
        assert not torch.allclose(head.logits(features), before)
        torch.testing.assert_close(head.output_table(), torch.tanh(head.output_proj(emb.weight)))


# --- sampled softmax ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in HEADS.names() if HEADS.component(n).normalized])
def test_sampled_softmax_over_the_whole_vocabulary_is_the_full_softmax(name: str) -> None:
    from nlgkit.heads.sampling import sampled_loss

    torch.manual_seed(0)
    head = make_head(name)
    features, targets = batch()
    mask = targets.ne(PAD)
    full = head.loss(features, targets, label_smoothing=0.1)
    sampled, overflow = sampled_loss(head.candidate_logits, head.vocab_size, features[mask], targets[mask], 1.0,
                                     label_smoothing=0.1)
    torch.testing.assert_close(sampled, full, atol=1e-4, rtol=1e-5)  # V′ = V in another order
    assert not overflow


def test_sampled_softmax_trains_on_the_batch_targets_and_a_share_of_negatives() -> None:
    from nlgkit.heads.base import SamplingConfig
    from nlgkit.heads.sampling import candidate_classes

    vocab = 200
    gold = torch.tensor([3, 7, 7, 150, 3])
    torch.manual_seed(1)
    rows, overflow = candidate_classes(gold, vocab, 0.25)
    assert rows.numel() == 50 and rows.unique().numel() == 50 and not overflow  # share · |V|, no repeats
    assert rows[:3].tolist() == [3, 7, 150]  # every positive kept
    rows, overflow = candidate_classes(torch.arange(30), vocab, 0.05)  # 30 targets > budget of 10
    assert rows.tolist() == list(range(30)) and overflow

    head = make_head("learned", vocab=vocab, sampling=SamplingConfig(share=0.1))
    assert head.sampling_share == 0.1
    features = torch.randn(2, 4, D)
    targets = torch.tensor([[3, 7, 150, PAD], [3, 9, PAD, PAD]])
    head.train()
    head.loss(features, targets).backward()
    touched = head.weight.grad.abs().sum(dim=1).nonzero().flatten()
    assert {3, 7, 9, 150} <= set(touched.tolist()) and touched.numel() <= 20  # V′ rows only
    head.eval()  # validation and search: the full vocabulary
    torch.testing.assert_close(head.loss(features, targets),
                               F.cross_entropy(head.logits(features[targets.ne(PAD)]), targets[targets.ne(PAD)],
                                               reduction="sum"))
    with pytest.raises(ConfigError, match="recipe.toml: head.sampling.share = 0.0"):
        HEADS.config_class("joint")(type="joint", sampling=SamplingConfig(share=0.0)).validate("recipe.toml", None)


def test_sampling_overflows_are_counted_for_the_training_log() -> None:
    from nlgkit.heads.base import SamplingConfig

    head = make_head("learned", vocab=40, sampling=SamplingConfig(share=0.1)).train()  # budget: 4 classes
    assert make_head("learned").train_stats() == {}  # nothing to log without sampling
    head.loss(torch.randn(1, 6, D), torch.tensor([[5, 6, 7, 8, 9, 10]]))  # 6 targets > budget
    head.loss(torch.randn(1, 2, D), torch.tensor([[5, 6]]))
    assert head.train_stats() == {"sampling_overflows": 1}
