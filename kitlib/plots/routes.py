"""Lesson 11's macro-to-micro map: which tool answers which question (the routes come from
the caller, ``kitlib.course.exercises.l11.route_table()``)."""
from __future__ import annotations


from . import new_axes, font


def plot_routes(routes, tools=None, ax=None, title="which tool answers which question"):
    """Questions (rows, ``key``) by tools (columns: ``tools``, default every boolean column), a
    filled dot where a tool answers. Returns the Figure."""
    tools = list(tools) if tools is not None else [c for c in routes.columns if routes[c].dtype == bool]
    ax = new_axes(ax, (8, 0.42 * len(routes) + 1.4))
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
