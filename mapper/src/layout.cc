// Placeholder until the mapper issue lands its layout parser.
#include "topoaware/mapper/layout.h"
