"""A two-layer GCN (gc_cpp.GraphConv) on Zachary's karate club, semi-supervised.

The club split in two factions (Mr. Hi's and the Officer's). Only a few members per
faction are labelled; the GCN learns from them and the friendship graph, and predicts
the faction of every other member. Prints the accuracy on the unlabelled members.

    python gcn_karate.py [--labels-per-faction 2] [--layout csr] [--output predictions.csv]
"""

from __future__ import annotations

import argparse
import csv
import warnings
from pathlib import Path

import networkx as nx
import torch
from torch import nn

import gc_cpp

FACTIONS = ("Mr. Hi", "Officer")


class GCN(nn.Module):
    """GraphConv -> ReLU -> dropout -> GraphConv (Kipf and Welling, ICLR 2017)."""

    def __init__(self, in_features: int, hidden: int, classes: int, dropout: float = 0.5):
        super().__init__()
        self.conv1 = gc_cpp.GraphConv(in_features, hidden)
        self.conv2 = gc_cpp.GraphConv(hidden, classes)
        self.dropout = nn.Dropout(dropout)

    def forward(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(adj, self.dropout(torch.relu(self.conv1(adj, x))))


def karate_club(layout: str = "csr"):
    """(normalized adjacency, one-hot features, faction labels, networkx graph)."""
    graph = nx.karate_club_graph()
    n = graph.number_of_nodes()
    edges = torch.tensor(list(graph.edges()), dtype=torch.long).t()
    # Unweighted and symmetric: each friendship both ways.
    indices = torch.cat([edges, edges.flip(0)], dim=1)
    adj = torch.sparse_coo_tensor(
        indices, torch.ones(indices.shape[1]), (n, n), check_invariants=True
    ).coalesce()
    adj = {"dense": adj.to_dense(), "coo": adj, "csr": adj.to_sparse_csr()}[layout]
    labels = torch.tensor([FACTIONS.index(graph.nodes[i]["club"]) for i in range(n)])
    # No node features: each member is its own one-hot vector, as in Kipf and Welling.
    return gc_cpp.normalize_adjacency(adj), torch.eye(n), labels, graph


def labelled_nodes(graph: nx.Graph, labels: torch.Tensor, per_faction: int) -> torch.Tensor:
    """The best-connected members of each faction (its leader first)."""
    chosen = []
    for faction in range(len(FACTIONS)):
        members = [i for i in range(len(labels)) if labels[i] == faction]
        members.sort(key=lambda i: (-graph.degree[i], i))
        chosen += members[:per_faction]
    return torch.tensor(sorted(chosen))


def train(
    *,
    labels_per_faction: int = 2,
    hidden: int = 16,
    epochs: int = 200,
    lr: float = 0.01,
    weight_decay: float = 5e-4,
    layout: str = "csr",
    seed: int = 0,
) -> dict:
    """Train on the labelled members; return the accuracy on the others and the predictions."""
    torch.manual_seed(seed)
    adj, features, labels, graph = karate_club(layout)
    train_idx = labelled_nodes(graph, labels, labels_per_faction)
    test_mask = torch.ones(len(labels), dtype=torch.bool)
    test_mask[train_idx] = False

    model = GCN(features.shape[1], hidden, len(FACTIONS))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    losses = []
    for _ in range(epochs):
        model.train()
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(adj, features)[train_idx], labels[train_idx])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

    model.eval()
    with torch.no_grad():
        predicted = model(adj, features).argmax(dim=1)
    correct = (predicted[test_mask] == labels[test_mask]).sum().item()
    return {
        "accuracy": correct / int(test_mask.sum()),
        "correct": correct,
        "unlabelled": int(test_mask.sum()),
        "labelled": train_idx.tolist(),
        "predicted": predicted.tolist(),
        "labels": labels.tolist(),
        "losses": losses,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels-per-faction", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--layout", choices=["dense", "coo", "csr"], default="csr")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, help="write member,faction,predicted as CSV")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")

    result = train(
        labels_per_faction=args.labels_per_faction,
        hidden=args.hidden,
        epochs=args.epochs,
        layout=args.layout,
        seed=args.seed,
    )
    losses = result["losses"]
    print(f"karate club: 34 members, 78 friendships, adjacency as {args.layout}")
    print(f"labelled members: {result['labelled']} ({args.labels_per_faction} per faction)")
    for epoch in (0, len(losses) // 4, len(losses) // 2, len(losses) - 1):
        print(f"  epoch {epoch + 1:4d}  training loss {losses[epoch]:.4f}")
    wrong = [
        i
        for i, (p, y) in enumerate(zip(result["predicted"], result["labels"], strict=True))
        if p != y and i not in result["labelled"]
    ]
    print(f"misclassified unlabelled members: {wrong or 'none'}")
    print(
        f"accuracy on the {result['unlabelled']} unlabelled members: "
        f"{result['accuracy']:.3f} ({result['correct']}/{result['unlabelled']})"
    )
    if args.output:
        with args.output.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["member", "faction", "predicted", "labelled"])
            for i, (p, y) in enumerate(zip(result["predicted"], result["labels"], strict=True)):
                writer.writerow([i, FACTIONS[y], FACTIONS[p], i in result["labelled"]])
        print(f"predictions written to {args.output}")


if __name__ == "__main__":
    main()
