"""The macro-to-micro map of lesson 11: which tool answers which question.

Drawing only: the routes come from the caller as a table (in the course,
``kitlib.course.exercises.l11.route_table()``), one row per question and one
boolean column per tool.
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from . import fig_size, font


def plot_routes(routes, tools=None, ax=None, title="which tool answers which question"):
    """A grid of questions (rows) by tools (columns), a dot where a tool answers.

    Parameters
    ----------
    routes : DataFrame
        ``key`` (the question's short name) and one boolean column per tool.
    tools : sequence of str, optional
        The tool columns, in drawing order (default: every boolean column).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
        x: tools, from the framework level to the timer; y: questions. A filled dot
        marks a tool that answers; a row with two dots is one that both timeline tools
        answer.
    """
    tools = list(tools) if tools is not None else [c for c in routes.columns if routes[c].dtype == bool]
    if ax is None:
        fig, ax = plt.subplots(figsize=fig_size(8, 0.42 * len(routes) + 1.4))
    else:
        fig = ax.figure
    for y, (_, r) in enumerate(routes.iterrows()):
        for x, t in enumerate(tools):
            if bool(r[t]):
                ax.plot(x, y, "o", markersize=font(11), color="#4C72B0")
            else:
                ax.plot(x, y, ".", markersize=font(4), color="0.8")
    ax.set_xticks(range(len(tools)), tools, fontsize=font(9))
    ax.set_yticks(range(len(routes)), list(routes["key"]), fontsize=font(9))
    ax.set_xlim(-0.5, len(tools) - 0.5)
    ax.set_ylim(len(routes) - 0.5, -0.5)
    ax.xaxis.tick_top()
    ax.set_xlabel("tool (framework → system → kernel → timer)")
    ax.set_title(title, pad=font(24))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
