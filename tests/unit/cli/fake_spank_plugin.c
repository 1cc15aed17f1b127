/* A stand-in SPANK plugin file for `doctor --spank`'s tests: what Slurm's loader reads of one
 * (plugin_name, plugin_type, plugin_version), built in every build, the sanitizer one included,
 * where the real plugin is not (it needs Slurm's headers). plugin_version: Slurm 24.11.5. */
#include <stdint.h>

const char plugin_name[] = "topo-aware test stand-in";
const char plugin_type[] = "spank";
const uint32_t plugin_version = 0x180b05;
