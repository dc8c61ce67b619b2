"""Pulumi program: the stack's inventory is checked first; a spec with errors changes nothing."""

from infra.stack import declare, stack_inventory, stack_settings

declare(stack_inventory(), stack_settings())
