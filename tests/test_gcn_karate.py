"""examples/09_gcn_karate: the GCN built from gc_cpp.GraphConv learns the karate club split
(its run.sh runs in tests/test_examples.py)."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "09_gcn_karate"

gc_cpp = pytest.importorskip("gc_cpp", reason="gc_cpp is not installed in this environment")
pytest.importorskip("networkx")


@functools.cache
def load_example():
    spec = importlib.util.spec_from_file_location("gcn_karate", EXAMPLE / "gcn_karate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def trained(layout: str):
    return load_example().train(labels_per_faction=2, layout=layout, seed=0)


@pytest.mark.parametrize("layout", ["csr", "dense"])
def test_accuracy_on_unlabelled_members(layout):
    result = trained(layout)
    assert result["unlabelled"] == 30
    assert result["accuracy"] > 0.8, result["accuracy"]
    assert result["losses"][-1] < result["losses"][0] / 10


def test_training_is_what_gets_it_there():
    # Untrained (0 epochs) the same network is near chance: the accuracy comes from learning.
    untrained = load_example().train(labels_per_faction=2, layout="dense", seed=0, epochs=0)
    assert untrained["accuracy"] < 0.7 < trained("dense")["accuracy"]


def test_deterministic_and_layout_independent():
    again = load_example().train(labels_per_faction=2, layout="dense", seed=0)
    assert again["losses"] == trained("dense")["losses"]
    assert again["predicted"] == trained("dense")["predicted"] == trained("csr")["predicted"]


def test_labelled_members_are_the_faction_leaders_first():
    example = load_example()
    _, _, labels, graph = example.karate_club("dense")
    assert example.labelled_nodes(graph, labels, 1).tolist() == [0, 33]
