#!/usr/bin/env python3
"""Builds the replay transcripts from the answer files.

For each operator directory (rmsnorm/, vector_add/) it reads expected.json
(the hand-written manifest: answers in the order the campaign is served
them, with the expected outcome and why), writes transcript.jsonl in the
`replay` provider's format (docs/providers.md: one JSON object per line with
a string "response"), and records in the manifest the SHA-256 of the device
code each usable answer should yield (the last fenced block that declares a
__global__ kernel, as kopt::llm::extract_candidate takes it). The CPU test
(tests/llm/test_replay_corpus.cpp) checks those hashes against the real
extractor, so a drift between this script and the extractor is caught; the
end-to-end script (bench/run_replay_e2e.sh) uses them to map stored
candidates (candidates.source_hash) back to answers.

Run after editing an answer:  python3 tests/data/replay/build_corpus.py
"""
import hashlib
import json
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
CODE_TAGS = {"cuda", "cu", "cuh", "c++", "cpp", "cxx", "cc", "c", "h", "hpp", "ptx"}
JSON_TAGS = {"json", "jsonc", "json5", "javascript", "js"}


def fenced_blocks(text):
    """Fenced blocks as the extractor reads them: (info, content, closed)."""
    blocks, cur, fence = [], None, None
    for line in text.split("\n"):
        if line.endswith("\r"):
            line = line[:-1]
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        m = re.match(r"^(`{3,}|~{3,})(.*)$", stripped) if indent < 4 else None
        if cur is None:
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                info = re.split(r"[ \t{]", m.group(2).strip(), maxsplit=1)[0].lower()
                cur = {"info": info, "content": "", "closed": False}
                blocks.append(cur)
                fence = m.group(1)
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not m.group(2).strip():
            cur["closed"] = True
            cur = None
        else:
            cur["content"] += line + "\n"
    return blocks


def device_code(text):
    """The device code the extractor would take, or None."""
    kernels = [b for b in fenced_blocks(text)
               if "__global__" in b["content"] and b["info"] not in JSON_TAGS]
    return kernels[-1]["content"] if kernels else None


def build(op_dir):
    manifest_path = op_dir / "expected.json"
    manifest = json.loads(manifest_path.read_text())
    lines = []
    for a in manifest["answers"]:
        text = (op_dir / a["file"]).read_text()
        entry = {"response": text, "model": "replay-corpus"}
        entry["stop_reason"] = a.get("stop_reason", "stop")
        lines.append(json.dumps(entry, ensure_ascii=False))
        code = device_code(text)
        if a["parse"] == "ok":
            if code is None:
                sys.exit(f"{a['file']}: expected a usable answer but found no kernel block")
            a["source_sha256"] = hashlib.sha256(code.encode()).hexdigest()
        else:
            a.pop("source_sha256", None)
    k = manifest["candidates_per_iteration"]
    if len(lines) % k:
        sys.exit(f"{op_dir.name}: {len(lines)} answers is not a multiple of {k} answers per iteration")
    manifest["iterations"] = len(lines) // k
    (op_dir / manifest["transcript"]).write_text("\n".join(lines) + "\n")
    manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    print(f"{op_dir.name}: {len(lines)} answers, {manifest['iterations']} iterations of {k}")


if __name__ == "__main__":
    for d in sorted(HERE.iterdir()):
        if (d / "expected.json").exists():
            build(d)
