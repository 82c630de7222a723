"""python/examples/transcribe.py, the Python version of fcb-transcribe's loop:
it compiles Whisper base (scripts/prepare_testdata.sh's whisper-base folder
with its log-mel front end) into one .fcb for the host's best target, and
its greedy tokens for a stable espeak-ng clip equal ONNX Runtime's for the
same loop on the same ONNX files (speech.ref/NAME.tokens, written by
tools/oracle/ort_transcribe.js). Bad input is refused with the reason."""

import importlib.util
import os
import wave

import pytest

import fcb

EXAMPLE = os.path.join(os.environ.get("FCB_SOURCE_DIR", ""), "python", "examples", "transcribe.py")


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("transcribe_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def whisper_fcb(example, testdata, tmp_path_factory):
    model = testdata / "whisper-base"
    if not (model / "config.json").exists():
        pytest.fail(f"{model} is missing: run scripts/prepare_testdata.sh")
    best = next(t["name"] for t in fcb.targets() if t["auto"])
    out = tmp_path_factory.mktemp("whisper") / "whisper.fcb"
    example.compile_fcb(str(model), str(out), [best], None)
    return out


def test_tokens_equal_onnx_runtimes(example, whisper_fcb, testdata):
    p = fcb.load(whisper_fcb)
    assert p.methods == ["encoder", "features", "first", "next"]
    assert p.attachments == ["config.json", "generation_config.json", "vocab.json"]
    want = (testdata / "speech.ref" / "speech_1.tokens").read_text().split()
    assert want, "no ONNX Runtime tokens for speech_1: run scripts/prepare_testdata.sh"
    assert not (testdata / "speech.ref" / "speech_1.unstable").exists()
    text, tokens = example.transcribe(str(whisper_fcb), str(testdata / "speech" / "speech_1.wav"))
    assert [str(t) for t in tokens] == want, text
    assert text.strip(), "an empty transcript"


def test_bad_input_is_refused(example, whisper_fcb, demo_fcb, testdata, tmp_path):
    clip = str(testdata / "speech" / "speech_1.wav")
    stereo = tmp_path / "stereo.wav"
    with wave.open(str(stereo), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\0\0" * 2 * 1600)
    with pytest.raises(ValueError, match="16 kHz mono 16-bit"):
        example.transcribe(str(whisper_fcb), str(stereo))
    text = tmp_path / "text.wav"
    text.write_text("hello, not audio")
    with pytest.raises(ValueError, match="not a PCM WAV"):
        example.transcribe(str(whisper_fcb), str(text))
    with pytest.raises(ValueError, match="was not made by fcb-transcribe compile"):
        example.transcribe(str(demo_fcb), clip)
    with pytest.raises(ValueError, match="not a Whisper model folder"):
        example.compile_fcb(str(tmp_path), str(tmp_path / "x.fcb"), ["generic"], None)
    assert not (tmp_path / "x.fcb").exists()
