"""Make a decision GGUF out of an ordinary one, for llama-server's `POST /v1/systemone`.

    python3 make_decision_gguf.py IN.gguf OUT.gguf [--type openjev] [--temperature noul=1.2 ...]
                                  [--template FILE]

llama-server answers `/v1/systemone` only for a model whose metadata says how: the decision
type (`<arch>.decision.type`; `openjev` reads the logits of one letter per option at the end
of the prompt), optional temperatures per question type (`<arch>.decision.temperature.<type>`),
and a chat template named `systemone` that writes the prompt, ending where the model writes
its letter. Without them the server answers 501. This copies every tensor and key of IN and
adds those, with a plain-text template suited to a base model (the default) or your own.

It turns a model into something llama-server will ask; it does not make it a good judge. A base
model this way is close to chance (it favours the first letter); a model trained to answer
letter-per-option prompts is what makes the answers mean something.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import gguf

TYPES = ("openjev", "lev", "nimble")  # the prompt-and-letter types a template alone can serve
QUESTION_TYPES = ("choice", "score", "noul")

# Variables from llama-server: state, instructions, type, options ({key, description}), images.
# Strings arrive as they are, other JSON values as values, shown here as JSON text. The server
# adds no special tokens, so the model's BOS text is put in front (see `bos_text`); the prompt
# ends after "Answer: " so that the next token is the letter.
def text(name: str) -> str:
    return "{{ " + name + " if " + name + " is string else " + name + " | tojson }}"


BASE_MODEL_TEMPLATE = (
    "{% set letters = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz' %}"
    "State:\n" + text("state") + "\n\nQuestion: " + text("instructions")
    + "{% if type == 'score' %} Rate along the levels below, lowest first.{% endif %}\nOptions:\n"
    "{% for o in options %}{{ letters[loop.index0] }}. "
    "{% if type == 'noul' %}{% if o.key == 'true' %}yes{% else %}no{% endif %}{% else %}{{ o.key }}{% endif %}"
    "{% if o.description %}: " + text("o.description") + "{% endif %}\n{% endfor %}"
    "Answer with the letter of the best option.\nAnswer: "
)


def bos_text(reader: gguf.GGUFReader) -> str:
    """The text of the model's BOS token when the model wants one, else ""."""
    add_bos = reader.get_field(gguf.Keys.Tokenizer.ADD_BOS)
    bos_id = reader.get_field(gguf.Keys.Tokenizer.BOS_ID)
    tokens = reader.get_field(gguf.Keys.Tokenizer.LIST)
    if bos_id is None or tokens is None or (add_bos is not None and not add_bos.contents()):
        return ""
    return tokens.contents()[bos_id.contents()]


def temperature(text: str) -> tuple[str, float]:
    name, _, value = text.partition("=")
    if name not in QUESTION_TYPES:
        raise argparse.ArgumentTypeError(f"{name!r}: the question type must be one of {', '.join(QUESTION_TYPES)}")
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected TYPE=NUMBER") from None
    if not number > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a temperature must be above 0")
    return name, number


def convert(source: Path, target: Path, kind: str, template: str | None, temperatures: dict[str, float]) -> None:
    """Copy `source` to `target` with the decision keys; `template` None is the base-model one."""
    reader = gguf.GGUFReader(source)
    if template is None:
        template = bos_text(reader) + BASE_MODEL_TEMPLATE
    arch_field = reader.get_field(gguf.Keys.General.ARCHITECTURE)
    if arch_field is None:
        sys.exit(f"{source}: no {gguf.Keys.General.ARCHITECTURE} key: not a model GGUF")
    arch = arch_field.contents()
    prefix = f"{arch}.decision."
    writer = gguf.GGUFWriter(target, arch=arch, endianess=reader.endianess)
    for field in reader.fields.values():
        # GGUF.* are the reader's virtual fields; the architecture is written by the writer;
        # an earlier decision setup is replaced.
        if (field.name.startswith("GGUF.") or field.name == gguf.Keys.General.ARCHITECTURE
                or field.name.startswith(prefix) or field.name == "tokenizer.chat_template.systemone"):
            continue
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), value_type, sub_type=sub_type)
    writer.add_string(prefix + "type", kind)
    for name, value in temperatures.items():
        writer.add_float32(prefix + f"temperature.{name}", value)
    writer.add_string("tokenizer.chat_template.systemone", template)
    for tensor in reader.tensors:
        writer.add_tensor_info(tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes, tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in reader.tensors:
        writer.write_tensor_data(tensor.data, tensor_endianess=reader.endianess)
    writer.close()


def build(target: Path, base_name: str, make_base: Callable[[Path], None], template: str | None) -> None:
    """`target` as an openjev decision model of the base GGUF that `make_base(path)` writes, both
    made in a scratch folder beside `target`, which is replaced only once it is whole."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        base = Path(tmp) / base_name
        make_base(base)
        partial = Path(tmp) / target.name
        convert(base, partial, "openjev", template, {})
        partial.replace(target)
    print(f"wrote {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--type", dest="kind", choices=TYPES, default="openjev")
    parser.add_argument("--temperature", type=temperature, action="append", default=[], metavar="TYPE=T",
                        help="divide the letter logits by T for that question type (default 1)")
    parser.add_argument("--template", type=Path, help="a Jinja file for the systemone template (default: base model's)")
    args = parser.parse_args()
    if args.source.resolve() == args.target.resolve():
        parser.error("the target must be another file")
    template = args.template.read_text(encoding="utf-8") if args.template else None
    partial = args.target.with_name(args.target.name + ".part")
    convert(args.source, partial, args.kind, template, dict(args.temperature))
    partial.replace(args.target)
    print(f"wrote {args.target}")


if __name__ == "__main__":
    main()
