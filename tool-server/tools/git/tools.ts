import type { Tool } from '../../kit/define.ts';
import type { GitToolContext } from './context.ts';
import { getGithubPullRequestInfo } from './github/pr.ts';
import { gitBranches, gitLog, gitShow } from './history.ts';
import { gitDiff, gitStatus } from './read.ts';

/** The git_tools set (toolsets/git_tools.yaml), in the order the tool-server lists them. */
export const gitTools: Tool<GitToolContext>[] = [
  gitStatus,
  gitDiff,
  gitLog,
  gitShow,
  gitBranches,
  getGithubPullRequestInfo,
];
