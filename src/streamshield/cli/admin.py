"""Command line for administration: ``streamshield admin init`` (no server needed) and
``streamshield client user|role|passwd`` (over HTTPS, as the logged-in user).

Passwords are never taken as command-line arguments (they would land in shell history
and ``ps``): they come from a file (``--password-file``, first line) or a hidden prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from streamshield.cli.http import OUTPUT, request, show


def _password(path: Path | None, prompt: str, confirm: bool = True) -> str:
    if path is not None:
        lines = path.read_text(encoding="utf-8").splitlines()
        return lines[0] if lines else ""
    return click.prompt(prompt, hide_input=True, confirmation_prompt=confirm)


# -- streamshield admin ---------------------------------------------------------------------


@click.group("admin")
def admin() -> None:
    """Administer a storage root directly (no server needed)."""


@admin.command("init")
@click.option(
    "--root",
    type=click.Path(path_type=Path),
    default=Path("streamshield-data"),
    show_default=True,
    help="Storage root (its catalog is <root>/catalog.db unless --catalog is given).",
)
@click.option("--catalog", "catalog_url", default=None, help="Catalog database URL.")
@click.option("--user", default="admin", show_default=True, help="The administrator's name.")
@click.option("--role", default="ADMIN", show_default=True, help="The administrators' role.")
@click.option(
    "--password-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Read the password from this file's first line (else a hidden prompt).",
)
@click.option(
    "--role-capacity",
    type=int,
    default=None,
    help="Roles the root's labels make room for (a multiple of 64; default 64). "
    "Fixed once roles exist.",
)
def admin_init(
    root: Path,
    catalog_url: str | None,
    user: str,
    role: str,
    password_file: Path | None,
    role_capacity: int | None,
) -> None:
    """Create the first administrator of a fresh root (owner of SYSTEM, role ADMIN).

    Refused when the root has any user. Then start the server (e.g. ``streamshield
    serve --no-example``), log in as this user and create users and roles.

    Example:

        streamshield admin init --root ./data --user admin --password-file admin.pw
    """
    from streamshield.catalog.administration import AdminError
    from streamshield.catalog.bootstrap import init_admin
    from streamshield.catalog.security import SecurityCatalog

    password = _password(password_file, f"password for {user}")
    root.mkdir(parents=True, exist_ok=True)
    security = SecurityCatalog(catalog_url or root / "catalog.db")
    try:
        init_admin(security, user, password, role, role_capacity)
    except AdminError as err:
        raise click.ClickException(err.message) from None
    click.echo(f"administrator {user} created with role {role} in {root}")


# -- streamshield client user ---------------------------------------------------------------


@click.group("user")
def user() -> None:
    """Users: create, list, show, set roles, reset passwords, disable, enable."""


USER_COLUMNS = ["name", "roles", "disabled"]


@user.command("create")
@click.argument("name")
@click.option("--role", "roles", multiple=True, help="A role the user holds (repeat).")
@click.option("--password-file", type=click.Path(exists=True, path_type=Path), default=None)
@OUTPUT
def user_create(name: str, roles: tuple[str, ...], password_file: Path | None, output: str):
    """Create user NAME (needs CHANGE SYSTEM).

    Example: streamshield client user create nina --role ND --password-file nina.pw
    """
    password = _password(password_file, f"password for {name}")
    body = {"name": name, "password": password, "roles": list(roles)}
    show([request("POST", "/users", json=body)], USER_COLUMNS, output)


@user.command("list")
@OUTPUT
def user_list(output: str) -> None:
    """List every user (needs CHANGE SYSTEM).

    Example: streamshield client user list --output json
    """
    show(request("GET", "/users")["users"], USER_COLUMNS, output, key="users")


@user.command("show")
@click.argument("name")
@OUTPUT
def user_show(name: str, output: str) -> None:
    """Show user NAME (yourself, or anyone as an administrator).

    Example: streamshield client user show nina
    """
    show([request("GET", f"/users/{name}")], USER_COLUMNS, output)


@user.command("roles")
@click.argument("name")
@click.option("--role", "roles", multiple=True, help="The user's roles from now on (repeat).")
@OUTPUT
def user_roles(name: str, roles: tuple[str, ...], output: str) -> None:
    """Replace the roles of user NAME (no --role: none left).

    Example: streamshield client user roles nina --role ND --role E
    """
    answer = request("PUT", f"/users/{name}/roles", json={"roles": list(roles)})
    show([answer], USER_COLUMNS, output)


@user.command("password")
@click.argument("name")
@click.option("--password-file", type=click.Path(exists=True, path_type=Path), default=None)
def user_password(name: str, password_file: Path | None) -> None:
    """Set the password of user NAME (administrator reset).

    Example: streamshield client user password nina --password-file new.pw
    """
    password = _password(password_file, f"new password for {name}")
    request("POST", f"/users/{name}/password", json={"password": password})
    click.echo(f"password of {name} set")


def _state_command(action: str, help_text: str) -> Callable[..., Any]:
    @user.command(action, help=help_text)
    @click.argument("name")
    @OUTPUT
    def command(name: str, output: str) -> None:
        show([request("POST", f"/users/{name}/{action}")], USER_COLUMNS, output)

    return command


_state_command(
    "disable",
    "Disable user NAME: her sessions end at once, login refuses her.\n\n"
    "Example: streamshield client user disable mallory",
)
_state_command("enable", "Enable user NAME again.\n\nExample: streamshield client user enable ann")


# -- streamshield client role ---------------------------------------------------------------


@click.group("role")
def role() -> None:
    """Roles and the role hierarchy: create, list, add-junior, remove-junior."""


ROLE_COLUMNS = ["name", "juniors"]


@role.command("create")
@click.argument("name")
@click.option("--junior", "juniors", multiple=True, help="A direct junior role (repeat).")
@OUTPUT
def role_create(name: str, juniors: tuple[str, ...], output: str) -> None:
    """Create role NAME (needs CHANGE SYSTEM); it is live at once.

    Example: streamshield client role create CARDIO --junior D
    """
    answer = request("POST", "/roles", json={"name": name, "juniors": list(juniors)})
    show([answer], ROLE_COLUMNS, output)


@role.command("list")
@OUTPUT
def role_list(output: str) -> None:
    """List roles with their direct juniors.

    Example: streamshield client role list
    """
    show(request("GET", "/roles")["roles"], ROLE_COLUMNS, output, key="roles")


@role.command("add-junior")
@click.argument("name")
@click.argument("junior")
@OUTPUT
def role_add_junior(name: str, junior: str, output: str) -> None:
    """Make JUNIOR a direct junior of NAME (NAME then reads what JUNIOR reads).

    Example: streamshield client role add-junior CARDIO D
    """
    answer = request("POST", f"/roles/{name}/juniors", json={"junior": junior})
    show([answer], ROLE_COLUMNS, output)


@role.command("remove-junior")
@click.argument("name")
@click.argument("junior")
@OUTPUT
def role_remove_junior(name: str, junior: str, output: str) -> None:
    """Remove JUNIOR from the direct juniors of NAME.

    Example: streamshield client role remove-junior CARDIO D
    """
    show([request("DELETE", f"/roles/{name}/juniors/{junior}")], ROLE_COLUMNS, output)


# -- streamshield client passwd -------------------------------------------------------------


@click.command("passwd")
@click.option("--current-file", type=click.Path(exists=True, path_type=Path), default=None)
@click.option("--new-file", type=click.Path(exists=True, path_type=Path), default=None)
def passwd(current_file: Path | None, new_file: Path | None) -> None:
    """Change your own password (asks for the current one).

    Example: streamshield client passwd
    """
    current = _password(current_file, "current password", confirm=False)
    new = _password(new_file, "new password")
    answer = request("POST", "/me/password", json={"current": current, "new": new})
    click.echo(f"password of {answer['name']} changed")


def attach(main: click.Group, client: click.Group) -> None:
    """Adds these commands to the ``streamshield`` and ``streamshield client`` groups."""
    main.add_command(admin)
    for command in (user, role, passwd):
        client.add_command(command)
