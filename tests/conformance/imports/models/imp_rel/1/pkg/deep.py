from ..sibling import VALUE

DEEP = VALUE + 1
