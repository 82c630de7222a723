#!/usr/bin/python3
"""Exports recurrent test models with PyTorch (torch.onnx, opset 14) and the
inputs of a 10-call stream: state tensors are model inputs and outputs, fed
back call after call, as streaming speech models run.

  lstm_stream  2-layer bidirectional LSTM (sequence first), then a
               unidirectional LSTM, + Linear head; state h0/c0 [4, 2, 32],
               h1/c1 [1, 2, 24]
  gru_stream   GRU (batch first) then a bidirectional GRU; state h0 [1, 2, 24],
               h1 [2, 2, 24]
  rnn_stream   bidirectional RNN with ReLU (batch first); state h0 [2, 3, 20]

For each model NAME: DIR/NAME.onnx and DIR/NAME.stream/ holding the chunks
(CALLS inputs stacked on a leading axis), the first call's states, and
stream.json: {"calls", "chunks": {input: file}, "state": {input: file},
"feed": {output: input}}. prepare_testdata.sh runs tools/oracle/ort_stream.js
on them for the reference; tests/recurrent_models_test.cc runs the same
stream through fcb.

  --out DIR   write every model into DIR
  --list      print the model names
"""
import argparse
import io
import json
import os
import warnings

SEED = 20261203
CALLS = 10


def models(torch):
    class LSTMStream(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(16, 32, num_layers=2, bidirectional=True)
            self.lstm2 = torch.nn.LSTM(64, 24)  # unidirectional
            self.head = torch.nn.Linear(24, 8)

        def forward(self, x, h0, c0, h1, c1):
            y, (h, c) = self.lstm(x, (h0, c0))
            y2, (h2, c2) = self.lstm2(y, (h1, c1))
            return self.head(y2), h, c, h2, c2

    class GRUStream(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = torch.nn.GRU(16, 24, batch_first=True)
            self.gru2 = torch.nn.GRU(24, 24, batch_first=True, bidirectional=True)

        def forward(self, x, h0, h1):
            y, h = self.gru(x, h0)
            y2, h2 = self.gru2(y, h1)
            return y2, h, h2

    class RNNStream(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.RNN(12, 20, nonlinearity="relu", batch_first=True, bidirectional=True)

        def forward(self, x, h0):
            y, h = self.rnn(x, h0)
            return y, h

    return {
        # name: (module, chunk shape, {state input: shape}, output names, {output: state input})
        "lstm_stream": (LSTMStream(), (5, 2, 16), {"h0": (4, 2, 32), "c0": (4, 2, 32), "h1": (1, 2, 24),
                                                    "c1": (1, 2, 24)},
                        ["output", "hn", "cn", "hn2", "cn2"], {"hn": "h0", "cn": "c0", "hn2": "h1", "cn2": "c1"}),
        "gru_stream": (GRUStream(), (2, 5, 16), {"h0": (1, 2, 24), "h1": (2, 2, 24)}, ["output", "hn", "hn2"],
                       {"hn": "h0", "hn2": "h1"}),
        "rnn_stream": (RNNStream(), (3, 4, 12), {"h0": (2, 3, 20)}, ["output", "hn"], {"hn": "h0"}),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        print("\n".join(["lstm_stream", "gru_stream", "rnn_stream"]))
        return
    import numpy as np
    import torch
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    os.makedirs(a.out, exist_ok=True)
    for name, (module, chunk, states, outputs, feed) in models(torch).items():
        module.eval()
        args = (torch.zeros(chunk),) + tuple(torch.zeros(s) for s in states.values())
        buf = io.BytesIO()
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, args, buf, opset_version=14, input_names=["input"] + list(states),
                              output_names=outputs)
        path = os.path.join(a.out, name + ".onnx")
        with open(path + ".tmp", "wb") as f:
            f.write(buf.getvalue())
        os.replace(path + ".tmp", path)
        d = os.path.join(a.out, name + ".stream")
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "input.npy"), rng.standard_normal((CALLS,) + chunk).astype(np.float32))
        for s, shape in states.items():
            np.save(os.path.join(d, s + ".npy"), (0.5 * rng.standard_normal(shape)).astype(np.float32))
        with open(os.path.join(d, "stream.json"), "w") as f:
            json.dump({"calls": CALLS, "chunks": {"input": "input.npy"},
                       "state": {s: s + ".npy" for s in states}, "feed": feed}, f, indent=1)


if __name__ == "__main__":
    main()
