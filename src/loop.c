/* placeholder */ typedef int placeholder_loop;
