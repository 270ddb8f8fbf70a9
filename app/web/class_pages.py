"""The real models' pages a live class can show, by the name the room's state gives each ("model", "decoder",
"translate": app.classroom.lesson.REAL_PAGES): a following student's whole page, and the workspace it fetches at each
change. Each real model's class module (app.web.class_model, class_decoder, class_translate) enters its own when it
is imported (app.main imports every router), so that app.web.classroom, which serves the class's page and
workspace, reaches them without importing another router."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Request
from fastapi.responses import Response

from app.classroom.store import Room

PageHtml = Callable[[Request, Room], Awaitable[str]]  # a following student's page
Workspace = Callable[[Request, Room], Awaitable[Response]]  # and the workspace it fetches at each change
FOLLOWING: dict[str, tuple[PageHtml, Workspace]] = {}


def enter_following(page: str, whole: PageHtml, workspace: Workspace) -> None:
    """Enter the real model's ``page`` (its name in the room's state): its following student's page and workspace."""
    FOLLOWING[page] = (whole, workspace)


def following_of(page: str) -> tuple[PageHtml, Workspace]:
    """The page and workspace of the real model's ``page``; KeyError names a page no class module entered."""
    return FOLLOWING[page]
