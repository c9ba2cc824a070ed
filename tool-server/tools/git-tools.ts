import type { Tool } from './define.ts';
import { gitBranches, gitLog, gitShow } from './git-history.ts';
import { gitDiff, gitStatus } from './git-read.ts';
import { getGithubPullRequestInfo } from './github-pr.ts';

/** The git_tools set (toolsets/git_tools.yaml), in the order the tool-server lists them. */
export const gitTools: Tool[] = [gitStatus, gitDiff, gitLog, gitShow, gitBranches, getGithubPullRequestInfo];
