"""Pulumi program: the stack's inventory is checked first; a spec with errors changes nothing."""

import pulumi

from infra.stack import declare

declare(pulumi.Config("infra").require("inventory"))
