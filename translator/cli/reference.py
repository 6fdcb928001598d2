"""docs/cli.md, the command-line reference, written from the Typer app itself: for each
command its usage line, the first paragraph of its help and one line an option (flags,
type, default, help). `make cli-docs` writes the page; tests/test_cli_reference.py checks
that the page is what this writes today."""

from __future__ import annotations

import re

import typer

HEADER = """# Command-line reference

<!-- Generated from the Typer app by `make cli-docs` (translator/cli/reference.py): edit the
commands' help, not this page. tests/test_cli_reference.py fails when the two differ. -->

`translator`: {about}

Each section holds what `translator COMMAND --help` prints: the usage line, the first
paragraph of the help and the options. An option's help names the config key it sets, if any;
`--set section.key=value` sets any key ([configs.md](configs.md)). A command given a
wrong option, file or value ends with one line on stderr and exit code 2
([errors.md](errors.md)).

The commands, in the order of the pipeline: {index}.
"""

TYPES = {"str": "TEXT", "path": "PATH", "int": "INT", "float": "FLOAT", "bool": "BOOL"}


def reference() -> str:
    """The page: the header, then a section for each command in `translator --help`'s order."""
    from translator.cli import app  # every command registered

    group = typer.main.get_command(app)
    ctx = typer.Context(group, info_name="translator")
    names = group.list_commands(ctx)
    index = ", ".join(f"[{name}](#{name})" for name in names)
    sections = [HEADER.format(about=_text(group.help or ""), index=index)]
    for name in names:
        command = group.get_command(ctx, name)
        sections.append(_command(command, typer.Context(command, info_name=name, parent=ctx)))
    return "\n".join(sections)


def _command(command, ctx) -> str:
    params = [p for p in command.get_params(ctx) if not p.hidden and p.name != "help"]
    usage = ["translator", ctx.info_name]
    if any(p.param_type_name == "option" for p in params):
        usage.append("[OPTIONS]")
    for param in params:
        if param.param_type_name == "argument":
            word = param.name.upper() + ("..." if param.nargs == -1 else "")
            usage.append(word if param.required else f"[{word}]")
    about = _text((command.help or "").split("\n\n")[0])
    lines = [f"## {ctx.info_name}", "", f"    {' '.join(usage)}", "", about, ""]
    lines += [_param(param, ctx) for param in params]
    return "\n".join(lines) + "\n"


def _param(param, ctx) -> str:
    """One line: `flags TYPE`: help. Default: `value`. (typer's help record, reworded)."""
    flags, help_text = param.get_help_record(ctx)
    extra = re.search(r"\s*\[([^\]]*)\]$", help_text)
    notes = []
    if extra and extra.group(1).startswith(("default:", "required")):
        help_text = help_text[: extra.start()]
        for note in extra.group(1).split("; "):
            key, _, value = note.partition(": ")
            notes.append(f"Default: `{value}`." if key == "default" else "Required.")
    if param.param_type_name == "argument":
        flags = param.name.upper() + ("..." if param.nargs == -1 else "")
    flags = re.sub(r"<(?:list\[)?(\w+)\]?>", lambda m: TYPES.get(m[1].lower(), m[1].upper()), flags)
    return f"- `{flags}`: " + " ".join([_text(help_text), *notes]).strip()


def _text(text: str) -> str:
    """Help text as one markdown line: rich's escapes undone, `<` kept from reading as HTML."""
    text = " ".join(text.replace("\\[", "[").split())
    parts = re.split(r"(`[^`]*`)", text)  # code spans as written
    return "".join(p if p.startswith("`") else p.replace("<", "\\<") for p in parts)
