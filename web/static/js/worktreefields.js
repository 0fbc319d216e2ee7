// worktreefields.js is the New session form's git worktree fields: a
// repository on the daemon's host, a new branch and its base. With a
// repository given, the workspace is a new worktree of it (docs/api.md,
// "Worktrees, files and mounts").

import { h } from './dom.js';

// create returns {elements, fill}: the fields, and fill(body), which adds
// body.worktree from them, or returns an error message.
export function create(field) {
  const repo = h('input', { id: 'ns-wt-repo', name: 'worktree_repo', placeholder: '/abs/path/of/a/repository', autocomplete: 'off' });
  const branch = h('input', { id: 'ns-wt-branch', name: 'worktree_branch', placeholder: 'agent/fix-login', autocomplete: 'off' });
  const base = h('input', { id: 'ns-wt-base', name: 'worktree_base', placeholder: 'HEAD', autocomplete: 'off' });
  return {
    elements: [
      field('ns-wt-repo', 'Git repository', repo, 'Work in a new git worktree of this repository (leave Workspace empty).'),
      field('ns-wt-branch', 'New branch', branch),
      field('ns-wt-base', 'Branch from', base),
    ],
    fill(body) {
      const r = repo.value.trim(), b = branch.value.trim(), from = base.value.trim();
      if (!r && !b && !from) return '';
      if (!r || !b) return 'A worktree needs both a repository and a new branch.';
      body.worktree = { repo: r, branch: b };
      if (from) body.worktree.base = from;
      return '';
    },
  };
}
