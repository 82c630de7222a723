"""Named data in the .fcb: fcb.compile(attachments=...) by path and by bytes,
Program.attachments / Program.attachment(name), refusals and inspect."""

import pytest

import fcb
from conftest import run_cli

SHAPES = {"input": [1, 3, 64, 64]}


def test_round_trip_paths_and_bytes(demo_model, tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(b"a\nb\nc\n")
    binary = bytes(range(256)) * 3
    out = tmp_path / "a.fcb"
    fcb.compile(demo_model, out, targets="generic", input_shapes=SHAPES,
                attachments={"vocab": vocab, "blob.bin": binary, "empty": b"", "cfg": str(vocab)})
    p = fcb.load(out)
    assert p.attachments == ["blob.bin", "cfg", "empty", "vocab"]
    assert p.attachment("vocab") == b"a\nb\nc\n"
    assert p.attachment("cfg") == b"a\nb\nc\n"
    assert p.attachment("blob.bin") == binary
    assert p.attachment("empty") == b""
    assert isinstance(p.attachment("empty"), bytes)
    with pytest.raises(fcb.NotFoundError) as e:
        p.attachment("vocab.txt")
    assert "'vocab.txt'" in str(e.value) and "blob.bin, cfg, empty, vocab" in str(e.value)
    summary = fcb.inspect(out)
    assert [(a["name"], a["size"]) for a in summary["attachments"]] == [
        ("blob.bin", 768), ("cfg", 6), ("empty", 0), ("vocab", 6)]


def test_without_attachments(demo_model, tmp_path):
    out = tmp_path / "a.fcb"
    fcb.compile(demo_model, out, targets="generic", input_shapes=SHAPES)
    assert fcb.load(out).attachments == []


@pytest.mark.parametrize("name,phrase", [
    ("", "the attachment name is empty"),
    ("a b", "byte \\x20 at position 1"),
    ("a=b", "byte \\x3d at position 1"),
    ("tab\t", "byte \\x09 at position 3"),
    ("n" * 256, "256 bytes long, more than the limit of 255"),
])
def test_bad_names_raise_value_error(demo_model, tmp_path, name, phrase):
    out = tmp_path / "a.fcb"
    for value in (b"x", tmp_path / "missing"):  # by bytes, and by path: refused before the file is read
        with pytest.raises(ValueError) as e:
            fcb.compile(demo_model, out, targets="generic", input_shapes=SHAPES, attachments={name: value})
        assert phrase in str(e.value)
        assert not out.exists()


def test_missing_file_writes_nothing(demo_model, tmp_path):
    out = tmp_path / "a.fcb"
    with pytest.raises(fcb.NotFoundError) as e:
        fcb.compile(demo_model, out, targets="generic", input_shapes=SHAPES,
                    attachments={"v": tmp_path / "missing"})
    assert "does not exist" in str(e.value)
    assert not out.exists()
    with pytest.raises(ValueError):
        fcb.compile(demo_model, out, targets="generic", attachments=["v"])


def test_cli_attach_matches_python(demo_model, cli, tmp_path):
    data = tmp_path / "data.bin"
    data.write_bytes(b"\x00\x01\xff")
    out = tmp_path / "cli.fcb"
    run_cli(cli, "compile", demo_model, "-o", out, "--target", "generic", "--input-shape", "input=1x3x64x64",
            "--attach", f"d={data}")
    p = fcb.load(out)
    assert p.attachments == ["d"] and p.attachment("d") == b"\x00\x01\xff"
    r = run_cli(cli, "inspect", out)
    assert "attachments: 1, 3 bytes" in r.stdout
