/* ckpt's workaround of Deeploy's readfs-files-kept-open (gvsoc/open_files.py): linked with -Wl,--wrap=pi_fs_open.
 * Deeploy's dory_mem.c opens each data file Init loads and never closes it, and pulp-sdk's readfs keeps each open
 * file's record and cache block in L2 until it is closed. Init reads every file whole, one after the other, and
 * never touches a file again once the next one is opened: so each open first closes the file opened before it,
 * and at most one file holds L2 at a time. */
#include <pmsis.h>
#include <bsp/fs.h>

pi_fs_file_t *__real_pi_fs_open(struct pi_device *device, const char *name, int flags);

static pi_fs_file_t *ckpt_open_file;

pi_fs_file_t *__wrap_pi_fs_open(struct pi_device *device, const char *name, int flags)
{
    if (ckpt_open_file != NULL) {
        pi_fs_close(ckpt_open_file);
        ckpt_open_file = NULL;
    }
    ckpt_open_file = __real_pi_fs_open(device, name, flags);
    return ckpt_open_file;
}
